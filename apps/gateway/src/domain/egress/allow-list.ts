import { isIP } from 'node:net';
import { type EgressPolicy, EgressRule } from '@ccp/api';
import Value from 'typebox/value';
import type { DecisionTotal } from '../../store/egress-decisions-repository.js';

/** A policy holds at most this many rules (EgressPolicy). */
const MAX_RULES = 500;

/**
 * The log of a log-only policy as an allow-list: an allow rule for each exact name or address, with its port,
 * that the policy would have blocked, ahead of the policy's own rules, in force. Destinations a rule cannot
 * name (a name without a dot, `_` in it) are left for the admin to write by hand; past the policy's size the
 * rest too.
 */
export function allowListFrom(
  destinations: readonly DecisionTotal[],
  policy: EgressPolicy | null,
): { rules: EgressRule[]; policy: EgressPolicy | null } {
  const seen = new Set<string>();
  const rules: EgressRule[] = [];
  const room = MAX_RULES - (policy?.rules.length ?? 0);
  const wouldBlock = destinations
    .filter((row) => row.decision === 'would_block')
    .toSorted((a, b) => a.destination.localeCompare(b.destination) || a.port - b.port);
  for (const row of wouldBlock) {
    const rule: EgressRule =
      isIP(row.destination) === 0
        ? { action: 'allow', domain: row.destination, port: String(row.port) }
        : { action: 'allow', address: row.destination, port: String(row.port) };
    const key = `${row.destination} ${row.port}`;
    if (seen.has(key) || !Value.Check(EgressRule, rule) || rules.length >= room) continue;
    seen.add(key);
    rules.push(rule);
  }
  return {
    rules,
    policy: policy && {
      mode: 'enforce',
      default_action: policy.default_action,
      rules: [...rules, ...policy.rules],
    },
  };
}
