import Type from 'typebox';
import { NullableTimestamp, Timestamp, Uuid } from './common.js';

export const EgressBudgetScope = Type.Union(
  [Type.Literal('host'), Type.Literal('user'), Type.Literal('egress_ip')],
  {
    description: 'What the budget counts: one host, all hosts of a user, or all traffic through an egress IP',
  },
);

export const EgressBudgetAction = Type.Union(
  [Type.Literal('notify'), Type.Literal('throttle'), Type.Literal('stop')],
  {
    description:
      'At the limit: notify only tells; throttle limits the rate of the hosts concerned in their egress gateways ' +
      '(lifted at the new month or when the budget is raised); stop stops them with the reason egress_budget',
  },
);

/** A budget as an admin sets it, per calendar month (UTC). */
export const EgressBudgetRequest = Type.Object(
  {
    limit_bytes: Type.Integer({
      minimum: 1,
      description: 'Bytes sent plus received per calendar month (UTC)',
    }),
    warning_percent: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 100,
        description: 'Share of the limit at which users are warned; default EGRESS_BUDGET_WARNING_PERCENT',
      }),
    ),
    action: EgressBudgetAction,
    throttle_bytes_per_second: Type.Optional(
      Type.Integer({
        minimum: 1024,
        description:
          'The rate (each way) a throttled host keeps; default EGRESS_BUDGET_THROTTLE_BYTES_PER_SECOND',
      }),
    ),
  },
  { additionalProperties: false },
);

export const EgressBudgetState = Type.Union(
  [Type.Literal('under'), Type.Literal('warned'), Type.Literal('reached')],
  { description: 'under: below the warning share; warned: past it; reached: at or past the limit' },
);

export const EgressBudget = Type.Object({
  scope: EgressBudgetScope,
  subject_id: Uuid,
  limit_bytes: Type.Integer({ minimum: 1 }),
  warning_percent: Type.Integer({ minimum: 1, maximum: 100 }),
  action: EgressBudgetAction,
  throttle_bytes_per_second: Type.Integer({ minimum: 1024 }),
  global_default: Type.Boolean({
    description: "true: the gateway's default for a host without its own budget",
  }),
  month: Type.String({ description: 'The calendar month (UTC) the use counts, YYYY-MM' }),
  used_bytes: Type.Integer({
    minimum: 0,
    description: 'Bytes sent plus received this month, as last metered',
  }),
  state: EgressBudgetState,
  warned_at: NullableTimestamp,
  reached_at: NullableTimestamp,
});

export const EgressBudgetList = Type.Object({ budgets: Type.Array(EgressBudget) });

/** The budget warning or limit a host's users were told of last this month. */
export const EgressBudgetNotice = Type.Object({
  state: Type.Union([Type.Literal('warned'), Type.Literal('reached')]),
  scope: EgressBudgetScope,
  subject_id: Uuid,
  action: EgressBudgetAction,
  used_bytes: Type.Integer({ minimum: 0 }),
  limit_bytes: Type.Integer({ minimum: 1 }),
  month: Type.String({ description: 'YYYY-MM (UTC)' }),
  message: Type.String({ description: 'What users were told' }),
  at: Timestamp,
});

/** What a host's egress is held to now, by its budgets and by the pause when its exit is in doubt. */
export const HostEgressState = Type.Object({
  budget: Type.Union([EgressBudgetNotice, Type.Null()], {
    description: 'The budget warning or limit its users were told of last this month; null: none',
  }),
  throttle_bytes_per_second: Type.Union([Type.Integer(), Type.Null()], {
    description: 'The rate its egress gateway holds it to for a reached budget; null: not throttled',
  }),
  paused: Type.Union(
    [
      Type.Object({
        reason: Type.String({
          description: 'Why its processes are frozen (its upstream failed or its exit drifted)',
        }),
        since: Timestamp,
      }),
      Type.Null(),
    ],
    {
      description:
        'Set while the workspace is frozen until its exit is verified again (EGRESS_PAUSE_WHEN_IN_DOUBT)',
    },
  ),
});

export type EgressBudgetScope = Type.Static<typeof EgressBudgetScope>;
export type EgressBudgetAction = Type.Static<typeof EgressBudgetAction>;
export type EgressBudgetRequest = Type.Static<typeof EgressBudgetRequest>;
export type EgressBudgetState = Type.Static<typeof EgressBudgetState>;
export type EgressBudget = Type.Static<typeof EgressBudget>;
export type EgressBudgetList = Type.Static<typeof EgressBudgetList>;
export type EgressBudgetNotice = Type.Static<typeof EgressBudgetNotice>;
export type HostEgressState = Type.Static<typeof HostEgressState>;
