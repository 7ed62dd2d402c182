import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import type { EgressRule } from '@ccp/api';
import {
  type CheckVerdict,
  type DnsReply,
  type EchoOutcome,
  parseEcho,
  type Trust,
  txtText,
} from './probe-client.js';
import type { EgressProbe, EgressSettings } from './settings.js';
import type { SocketAddress } from './tunnel-engine.js';

/**
 * What proves a path, shared by the egress test (control plane, through a short-lived tunnel) and the start's
 * path check (inside the workspace): the IP echoes that must all see the exit, the whoami name a resolver
 * answers with its asker, and the operator's probe when there is one. The two callers differ only in how they
 * reach these endpoints; the questions asked (probe-client.ts) and the verdicts are made here.
 *
 * The upstream carries every one of these questions, so only what it cannot read or forge proves anything:
 * answers over TLS whose certificate is checked (HTTPS echoes, the whoami asked over DoH, the probe over HTTPS
 * with its CA pinned), and the probe's DNS log, read by the control plane over HTTPS.
 */
export interface VerificationPlan {
  /** IP echoes (docs/egress-probe.md); a host name is resolved through the tunnel, IPv4 only. */
  exitIpUrls: string[];
  /** How many echoes must answer; every answer must see the exit. */
  minEchoAnswers: number;
  /**
   * A CH TXT name a resolver answers with the address the question came from. Asked over DoH (`dohUrl`) through
   * the tunnel, the answer proves the resolver saw the exit, and nobody on the way can forge it. Asked of the
   * tunnel's own DNS (which sends it over TCP to `server`, through the upstream), it proves the tunnel's DNS
   * enters the upstream; the upstream can read and answer that one, so it only ever catches a leak.
   */
  whoami: { name: string; dohUrl: string; server: SocketAddress } | null;
  probe: EgressProbe | null;
  /** Extra CA certificates (PEM) trusted for HTTPS echoes and DoH besides the system's. */
  caPem: string | null;
  /** The probe's own CA (EGRESS_PROBE_CA_FILE): its certificate must chain to this one alone. */
  probeCaPem: string | null;
}

export function verificationPlan(settings: EgressSettings): VerificationPlan {
  return {
    exitIpUrls: settings.exitIpUrls,
    minEchoAnswers: settings.minEchoAnswers,
    whoami: settings.dnsWhoami
      ? { name: settings.dnsWhoami, dohUrl: settings.dohUrl, server: settings.dnsServer }
      : null,
    probe: settings.probe,
    caPem: settings.caFile ? readFileSync(settings.caFile, 'utf8') : null,
    probeCaPem: settings.probe?.caFile ? readFileSync(settings.probe.caFile, 'utf8') : null,
  };
}

/** Whom TLS to `url` trusts: the probe's pinned CA for the probe's own origin, else the system's and caPem. */
export function trustFor(plan: VerificationPlan, url: string): Trust {
  const probe = plan.probe && new URL(plan.probe.url).origin === new URL(url).origin;
  if (probe && plan.probeCaPem) return { extra: null, pinned: plan.probeCaPem };
  return { extra: plan.caPem, pinned: null };
}

/** The tunnel's DNS settings: the resolver for everyone, and the probe's DoH for the probe's own zone. */
export function tunnelDns(settings: EgressSettings) {
  const { probe } = settings;
  return {
    dohUrl: settings.dohUrl,
    tcpResolver: settings.dnsServer,
    zones: probe ? [{ zone: probe.dnsZone, dohUrl: probe.dohUrl }] : [],
  };
}

/** One line for the start-up log: which verification is in force. */
export function describeVerification(settings: EgressSettings): string {
  const dns = `names resolve through ${settings.dohUrl} (other types ${settings.dnsServer.address}:${settings.dnsServer.port})`;
  const echoes = settings.exitIpUrls.join(' and ');
  const whoami = settings.dnsWhoami
    ? `, DNS path by ${settings.dnsWhoami} over DoH`
    : settings.probe
      ? ''
      : ', DNS path check off';
  if (settings.probe) {
    const pinned = settings.probe.caFile ? `, its CA pinned` : '';
    return `egress verification: own probe ${settings.probe.url} (zone ${settings.probe.dnsZone}${pinned}), exit IP from ${echoes}${whoami}; ${dns}`;
  }
  return `egress verification: public endpoints, exit IP from ${echoes}${whoami}; ${dns}`;
}

export const sameAddress = (a: string, b: string) =>
  a.replace(/^::ffff:/, '').toLowerCase() === b.replace(/^::ffff:/, '').toLowerCase();

/**
 * Every echo that answers must see the declared exit (one source alone could lie or be wrong), and at least
 * `minAnswers` must answer: one provider's outage is its own outcome (echoOutages), not a verdict on the path.
 */
export function exitVerdict(outcomes: EchoOutcome[], exitIp: string, minAnswers = 1): CheckVerdict | null {
  for (const outcome of outcomes) {
    const observed = answered(outcome) ? parseEcho(outcome.body ?? '') : null;
    if (observed !== null && !sameAddress(observed, exitIp))
      return {
        code: 'exit_ip_mismatch',
        message: `${outcome.url} sees the traffic from ${observed}, not the declared ${exitIp}`,
      };
  }
  const out = echoOutages(outcomes);
  if (outcomes.length - out.length >= Math.min(minAnswers, outcomes.length)) return null;
  return {
    code: 'upstream_unreachable',
    message: `${out.length === outcomes.length ? 'no IP echo answered' : `fewer than ${minAnswers} IP echoes answered`} through the upstream (${out.join('; ')}); the IP echoes are EGRESS_EXIT_IP_URLS, see docs/troubleshooting.md#host-start-errors`,
  };
}

/** The echoes that gave no address, each with why: "<url> (<reason>)". */
export function echoOutages(outcomes: EchoOutcome[]): string[] {
  return outcomes.flatMap((outcome) => {
    if (!answered(outcome)) return [`${outcome.url} (${outcome.error ?? `HTTP ${outcome.status}`})`];
    return parseEcho(outcome.body ?? '') === null ? [`${outcome.url} (an answer with no address in it)`] : [];
  });
}

const answered = (outcome: EchoOutcome) => outcome.error === undefined && outcome.status === 200;

/** The first address each echo reported (for the egress test's `observed`). */
export function observedExit(outcomes: EchoOutcome[], exitIp: string): string | null {
  const seen = outcomes.map((outcome) => parseEcho(outcome.body ?? '')).filter((ip) => ip !== null);
  return seen.find((ip) => !sameAddress(ip, exitIp)) ?? seen[0] ?? null;
}

/**
 * The whoami answer must be the exit: the question left through the upstream and nowhere else. `via` says
 * which resolver was asked: over DoH (EGRESS_DOH_URL), or the tunnel's own DNS (EGRESS_DNS_SERVER).
 */
export function whoamiVerdict(
  reply: DnsReply,
  name: string,
  exitIp: string,
  via: 'doh' | 'tunnel',
): CheckVerdict | null {
  const setting = via === 'doh' ? 'EGRESS_DOH_URL' : 'EGRESS_DNS_SERVER';
  const asked = via === 'doh' ? `the lookup of ${name} over DoH` : `the lookup of ${name}`;
  if (!reply.ok)
    return {
      code: 'dns_failed',
      message: `${reply.error}; the resolver asked is ${setting} (docs/egress-probe.md)`,
    };
  const text = txtText(reply.packet);
  if (text === null || !isIP(text.trim()))
    return {
      code: 'dns_failed',
      message: `${asked} gave no address: ${setting} may not answer it (EGRESS_DNS_WHOAMI=off turns the check off; docs/egress-probe.md)`,
    };
  if (!sameAddress(text.trim(), exitIp))
    return {
      code: 'dns_leak',
      message: `the ${via === 'doh' ? 'DoH' : "tunnel's"} resolver saw ${asked} from ${text.trim()}, not ${exitIp}`,
    };
  return null;
}

/** The probe's authoritative server must have seen `name` asked, and only from the exit. */
export function probeLogVerdict(queriers: string[], name: string, exitIp: string): CheckVerdict | null {
  if (queriers.length === 0)
    return {
      code: 'dns_leak',
      message: `the probe never saw the lookup of ${name}: it was answered elsewhere`,
    };
  const strangers = [...new Set(queriers.filter((source) => !sameAddress(source, exitIp)))];
  if (strangers.length > 0)
    return { code: 'dns_leak', message: `the probe saw the lookup of ${name} from ${strangers.join(', ')}` };
  return null;
}

/**
 * What the path check reaches from inside the workspace (path-check.ts): the IP echoes and the DoH resolver it
 * asks the whoami over, as allow rules by address or name and port, and the names it asks the workspace's
 * resolver (the echoes' hosts, the whoami name, the probe's zone). An enforced egress policy allows these
 * before its own rules, so a policy that denies by default still lets a start or a switch prove its path.
 */
export function pathCheckDestinations(settings: EgressSettings): { rules: EgressRule[]; names: string[] } {
  const rules: EgressRule[] = [];
  const names: string[] = [];
  const reach = (text: string) => {
    const url = new URL(text);
    const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
    const port = url.port || (url.protocol === 'https:' ? '443' : '80');
    if (isIP(host) !== 0) rules.push({ action: 'allow', address: host, port });
    else {
      rules.push({ action: 'allow', domain: host, port });
      names.push(host);
    }
  };
  for (const url of settings.exitIpUrls) reach(url);
  if (settings.dnsWhoami) {
    reach(settings.dohUrl);
    names.push(settings.dnsWhoami.toLowerCase());
  }
  if (settings.probe) names.push(settings.probe.dnsZone, `*.${settings.probe.dnsZone}`);
  const unique = <T>(items: T[]) => [...new Map(items.map((item) => [JSON.stringify(item), item])).values()];
  return { rules: unique(rules), names: unique(names) };
}
