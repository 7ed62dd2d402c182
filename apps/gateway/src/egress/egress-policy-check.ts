import { isIP } from 'node:net';
import type { EgressPolicy } from '@ccp/api';

/** A field of a policy that cannot be used, named as the API's validation details name fields. */
export interface PolicyProblem {
  field: string;
  message: string;
}

const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * What the schema cannot say about a policy: rules that match nothing, names, addresses and ports that are not
 * ones. Fields are named `rules.<index>.<field>`, as the API's validation errors name them.
 */
export function egressPolicyProblems(policy: EgressPolicy): PolicyProblem[] {
  const problems: PolicyProblem[] = [];
  policy.rules.forEach((rule, index) => {
    const at = (field: string, message: string) =>
      problems.push({ field: `rules.${index}${field ? `.${field}` : ''}`, message });
    if (rule.domain === undefined && rule.address === undefined && rule.port === undefined)
      at('', 'matches nothing: give a domain, an address or a port');
    if (rule.domain !== undefined && !isDomainPattern(rule.domain))
      at(
        'domain',
        `"${rule.domain}" is not a name: lower-case labels of letters, digits and hyphens, at least two (example.com), or *. and a name for its subdomains (*.example.com)`,
      );
    if (rule.address !== undefined && !isAddressOrBlock(rule.address))
      at(
        'address',
        `"${rule.address}" is not an address or CIDR block: an IPv4 or IPv6 address, optionally with /prefix (203.0.113.0/24)`,
      );
    if (rule.port !== undefined && !isPortOrRange(rule.port))
      at('port', `"${rule.port}" is not a port or a range: 1 to 65535, a range low-high (8000-8999)`);
  });
  return problems;
}

/** The policy as given, once it has no problem; else a TypeError naming the first. */
export function checkedEgressPolicy(policy: EgressPolicy): EgressPolicy {
  const first = egressPolicyProblems(policy)[0];
  if (first) throw new TypeError(`${first.field.replace(/^rules\.(\d+)/, 'rules[$1]')} ${first.message}`);
  return policy;
}

export function isDomainPattern(value: string): boolean {
  const name = value.startsWith('*.') ? value.slice(2) : value;
  const labels = name.split('.');
  return name.length <= 253 && labels.length >= 2 && labels.every((label) => LABEL.test(label));
}

export function isAddressOrBlock(value: string): boolean {
  const [address = '', prefix, extra] = value.split('/');
  const family = isIP(address);
  const bits = family === 4 ? 32 : 128;
  return (
    family !== 0 &&
    extra === undefined &&
    (prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= bits))
  );
}

export function isPortOrRange(value: string): boolean {
  if (!/^\d{1,5}(-\d{1,5})?$/.test(value)) return false;
  const [from, to = from] = value.split('-').map(Number) as [number, number?];
  return from >= 1 && to! <= 65535 && from <= to!;
}

/** Whether a rule's domain (exact, or `*.` for subdomains only) names `name` (lower case, no final dot). */
export function domainMatches(pattern: string, name: string): boolean {
  return pattern.startsWith('*.') ? name.endsWith(pattern.slice(1)) : name === pattern;
}
