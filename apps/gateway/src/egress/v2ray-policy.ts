import type { EgressPolicy, EgressRule } from '@ccp/api';
import { checkedEgressPolicy } from './egress-policy-check.js';
import type { V2rayRoutingRule } from './v2ray-tunnel.js';

export const BLOCKED_TAG = 'policy-blocked';
/**
 * In `log-only` mode what the rules would deny leaves through a copy of the upstream's outbound under this tag,
 * so that v2ray's log tells it apart from what they allow (v2ray-decisions.ts reads it).
 */
export const WOULD_BLOCK_TAG = 'policy-would-block';

/** Whether v2ray has decisions of this policy to log: what it blocks, or would block. */
export function policyRecordsDecisions(policy: EgressPolicy | null | undefined): boolean {
  return policy?.mode === 'enforce' || policy?.mode === 'log-only';
}

/** A rule for the workspace's traffic, as v2ray's field rule takes it. */
type PolicyRule = Omit<V2rayRoutingRule, 'inboundTag'> & { domain?: string[]; ip?: string[] };

/**
 * The routing of an enforced egress policy for traffic arriving at `inboundTag`: each rule in order, then the
 * default action; a denied connection goes to a blackhole outbound (`BLOCKED_TAG`). v2ray matches a domain on
 * the name sniffing recovered (TLS SNI, HTTP Host) and an address on traffic that has none. `log-only` routes
 * the same way, with what would be denied to `WOULD_BLOCK_TAG` (the upstream too); `off` routes nothing. A rule
 * that cannot be used throws a TypeError naming it.
 */
export function v2rayPolicyRules(
  policy: EgressPolicy,
  inboundTag: string,
  allowTag: string,
): V2rayRoutingRule[] {
  checkedEgressPolicy(policy);
  if (!policyRecordsDecisions(policy)) return [];
  const denyTag = policy.mode === 'enforce' ? BLOCKED_TAG : WOULD_BLOCK_TAG;
  const target = (action: EgressRule['action']) => (action === 'deny' ? denyTag : allowTag);
  const rules: V2rayRoutingRule[] = policy.rules.map((rule) => ({
    type: 'field',
    inboundTag: [inboundTag],
    ...matcher(rule),
    outboundTag: target(rule.action),
  }));
  rules.push({ type: 'field', inboundTag: [inboundTag], outboundTag: target(policy.default_action) });
  return rules;
}

function matcher(rule: EgressRule): Omit<PolicyRule, 'type' | 'outboundTag'> {
  return {
    ...(rule.domain === undefined ? {} : { domain: [v2rayDomain(rule.domain)] }),
    ...(rule.address === undefined ? {} : { ip: [rule.address] }),
    ...(rule.port === undefined ? {} : { port: rule.port }),
  };
}

/** `example.com` is that name only (`full:`); `*.example.com` its subdomains, not the name itself. */
function v2rayDomain(domain: string): string {
  if (!domain.startsWith('*.')) return `full:${domain}`;
  return `regexp:\\.${domain.slice(2).replaceAll('.', '\\.')}$`;
}
