import type { EgressBudgetAction } from '@ccp/api';
import Type, { type Static } from 'typebox';
import { wholeNumber } from '../../shared/settings.js';

/** Monthly egress budgets' global defaults, and the pause when a host's exit is in doubt (docs/configuration.md). */
export const EgressBudgetVariables = Type.Object({
  EGRESS_BUDGET_HOST_BYTES: wholeNumber(
    0,
    'Global default egress budget of a host per calendar month (UTC), bytes sent plus received, for hosts without their own; `0`: none',
  ),
  EGRESS_BUDGET_WARNING_PERCENT: Type.Integer({
    minimum: 1,
    maximum: 100,
    default: 80,
    description:
      'Share of a budget (percent) at which users are warned: an event, a live message, a line in attached terminals and tmux, a banner',
    problem: 'must be a whole number from 1 to 100 (got "{got}")',
  }),
  EGRESS_BUDGET_ACTION: Type.Union([Type.Literal('notify'), Type.Literal('throttle'), Type.Literal('stop')], {
    default: 'notify',
    description:
      "What the global default budget does at its limit: `notify` (tell only), `throttle` (a rate limit in the host's egress gateway until the month ends or the budget is raised), `stop` (an ordinary stop, reason `egress_budget`)",
    problem: 'must be notify, throttle or stop',
  }),
  EGRESS_BUDGET_THROTTLE_BYTES_PER_SECOND: Type.Integer({
    minimum: 1024,
    default: 131072,
    description: 'The rate (bytes per second, each way) a throttled host keeps when its budget does not say',
    problem: 'must be a whole number, 1024 or more (got "{got}")',
  }),
  EGRESS_PAUSE_WHEN_IN_DOUBT: Type.Union([Type.Literal('off'), Type.Literal('on')], {
    default: 'off',
    description:
      "`on`: when an egress health round finds a running host's upstream failing or its exit drifted, its workspace's processes are frozen (sessions stay open) until the exit is verified again",
    problem: 'must be on or off',
  }),
});
export type EgressBudgetVariables = Static<typeof EgressBudgetVariables>;

/** What budgets default to: the global default of hosts (none when `hostBytes` is 0), and each field unset. */
export interface EgressBudgetSettings {
  hostBytes: number;
  warningPercent: number;
  action: EgressBudgetAction;
  throttleBytesPerSecond: number;
  /** Freeze a workspace while its exit is in doubt (EGRESS_PAUSE_WHEN_IN_DOUBT). */
  pauseWhenInDoubt: boolean;
}

export function egressBudgetSettings(variables: EgressBudgetVariables): EgressBudgetSettings {
  return {
    hostBytes: variables.EGRESS_BUDGET_HOST_BYTES,
    warningPercent: variables.EGRESS_BUDGET_WARNING_PERCENT,
    action: variables.EGRESS_BUDGET_ACTION,
    throttleBytesPerSecond: variables.EGRESS_BUDGET_THROTTLE_BYTES_PER_SECOND,
    pauseWhenInDoubt: variables.EGRESS_PAUSE_WHEN_IN_DOUBT === 'on',
  };
}
