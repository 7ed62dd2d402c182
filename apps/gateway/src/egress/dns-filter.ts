import type { EgressPolicy, EgressRule } from '@ccp/api';
import { domainMatches } from './egress-policy-check.js';

/** One line of the DNS filter's rules: names it refuses or answers, the first line that matches deciding. */
export interface DnsFilterLine {
  verdict: 'refuse' | 'answer';
  /** `example.com` (that name), `*.example.com` (its subdomains) or `*` (every name). */
  pattern: string;
}

/**
 * Which names the workspace's resolver refuses under an enforced policy: those every connection to which the
 * rules would deny, whatever its port. Read in the rules' order: a rule naming the name (or no name at all)
 * without a port decides; one with a port that allows means the name is reachable on some port, so it is
 * answered; one with a port that denies, and address rules (v2ray matches them only on traffic without a
 * name), leave the question open. What no rule decides follows the default action. `extraNames` are answered
 * before any rule. Null when no name is refused: the filter then answers every name.
 */
export function dnsFilterLines(policy: EgressPolicy, extraNames: string[] = []): DnsFilterLine[] | null {
  if (policy.mode !== 'enforce') return null;
  const lines: DnsFilterLine[] = extraNames.map((pattern) => ({ verdict: 'answer', pattern }));
  for (const rule of policy.rules) {
    const line = lineOf(rule);
    if (line) lines.push(line);
  }
  lines.push({ verdict: policy.default_action === 'deny' ? 'refuse' : 'answer', pattern: '*' });
  // Lines after the first catch-all can never decide.
  const end = lines.findIndex((line) => line.pattern === '*');
  const kept = lines.slice(0, end + 1);
  return kept.some((line) => line.verdict === 'refuse') ? kept : null;
}

function lineOf(rule: EgressRule): DnsFilterLine | null {
  if (rule.address !== undefined) return null;
  if (rule.port !== undefined && rule.action === 'deny') return null;
  return { verdict: rule.action === 'deny' ? 'refuse' : 'answer', pattern: rule.domain ?? '*' };
}

/** The filter's verdict on a name (lower case, no final dot): the first line that matches, else answered. */
export function dnsVerdict(lines: DnsFilterLine[], name: string): DnsFilterLine['verdict'] {
  const line = lines.find((candidate) => candidate.pattern === '*' || domainMatches(candidate.pattern, name));
  return line?.verdict ?? 'answer';
}

/** The file the egress gateway's DNS filter reads (image/README.md): one `<verdict> <pattern>` a line. */
export function renderDnsFilterRules(lines: DnsFilterLine[]): string {
  return [
    '# DNS filter of a cloud-cli-proxy egress gateway. Generated; the first line that matches a name decides.',
    ...lines.map((line) => `${line.verdict} ${line.pattern}`),
    '',
  ].join('\n');
}
