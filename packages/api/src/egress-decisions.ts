import Type from 'typebox';
import { Timestamp, Uuid } from './common.js';
import { EgressPolicy, EgressRule } from './egress-policy.js';

/** Which minutes a read of a host's blocked destinations covers: from `from` on (default: the last 24 hours). */
export const EgressDecisionsQuery = Type.Object(
  {
    from: Type.Optional(
      Type.String({ format: 'date-time', description: 'Start (RFC 3339); default: 24 hours ago' }),
    ),
  },
  { additionalProperties: false },
);

/** `blocked`: refused (policy `enforce`); `would_block`: let through, but the rules deny it (`log-only`). */
export const EgressDecision = Type.Union([Type.Literal('blocked'), Type.Literal('would_block')]);

export const EgressDecisionDestination = Type.Object({
  destination: Type.String({
    description: 'The name the workspace asked for (TLS SNI, HTTP Host), else the address it connected to',
  }),
  port: Type.Integer({ minimum: 0, maximum: 65535 }),
  decision: EgressDecision,
  count: Type.Integer({ minimum: 1, description: 'Connections in the window' }),
  last_seen: Timestamp,
});

export const EgressDecisions = Type.Object({
  host_id: Uuid,
  from: Timestamp,
  /** The most recently seen first, at most 500. */
  destinations: Type.Array(EgressDecisionDestination),
  uncounted: Type.Array(
    Type.Object({
      minute: Timestamp,
      destinations: Type.Integer({
        minimum: 0,
        description: 'Distinct destinations past EGRESS_POLICY_LOG_DESTINATIONS in that minute',
      }),
      count: Type.Integer({ minimum: 0, description: 'Their connections, counted nowhere else' }),
    }),
    { description: 'Minutes whose destinations passed the cap: what went uncounted' },
  ),
  allow_list: Type.Object(
    {
      rules: Type.Array(EgressRule, {
        description: 'An allow rule for each exact name or address (and port) seen as would_block',
      }),
      policy: Type.Union([EgressPolicy, Type.Null()], {
        description:
          'The policy in force with those rules first and mode `enforce`: what applying the log as an allow-list gives (null without a policy)',
      }),
    },
    { description: 'The log turned into an allow-list' },
  ),
});

export type EgressDecisionsQuery = Type.Static<typeof EgressDecisionsQuery>;
export type EgressDecisions = Type.Static<typeof EgressDecisions>;
export type EgressDecisionDestination = Type.Static<typeof EgressDecisionDestination>;
