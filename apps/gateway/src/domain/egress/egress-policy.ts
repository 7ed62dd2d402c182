import type { EffectiveEgressPolicy, EgressPolicy } from '@ccp/api';
import { egressPolicyProblems } from '../../egress/egress-policy-check.js';
import { errors } from '../errors.js';

/** What a host follows when no level sets a policy: everything allowed. */
const NO_POLICY: EffectiveEgressPolicy = { mode: 'off', default_action: 'allow', rules: [], source: 'none' };

/** A stored policy (JSON text, null: none at that level). */
export function storedPolicy(text: string | null): EgressPolicy | null {
  return text === null ? null : (JSON.parse(text) as EgressPolicy);
}

/** A host's own policy, else its owner's default, else the gateway's (EGRESS_POLICY), else none. */
export function effectiveEgressPolicy(
  host: { egress_policy: string | null; owner_egress_policy: string | null },
  global: EgressPolicy | null,
): EffectiveEgressPolicy {
  const own = storedPolicy(host.egress_policy);
  if (own) return { ...own, source: 'host' };
  const owner = storedPolicy(host.owner_egress_policy);
  if (owner) return { ...owner, source: 'user' };
  return global ? { ...global, source: 'global' } : NO_POLICY;
}

/** The policy an egress gateway is given for it: null when it changes nothing. */
export function gatewayPolicy(effective: EffectiveEgressPolicy): EgressPolicy | null {
  if (effective.source === 'none') return null;
  const { source: _, ...policy } = effective;
  return policy;
}

/** A policy the gateway can enforce, or 400 `validation_failed` naming each field that is not. */
export function checkPolicy(policy: EgressPolicy): void {
  const problems = egressPolicyProblems(policy);
  const first = problems[0];
  if (first) throw errors.validation(problems, `Invalid field ${first.field}: ${first.message}`);
}
