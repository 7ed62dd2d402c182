import type { EgressBudgetNotice, HostEgressState } from '@ccp/api';
import { isoOut, nowIso } from '../../shared/clock.js';

/** The columns of a host row that say what holds its egress (migration 0014). */
export interface HostEgressColumns {
  egress_throttle_bytes_per_second: number | string | null;
  egress_budget_notice: string | null;
  paused_reason: string | null;
  paused_at: string | null;
}

/** The calendar month (UTC) a timestamp falls in, as budgets count it: `2026-11`. */
export const monthOf = (iso: string): string => iso.slice(0, 7);

/** A host's throttle, its budget notice of this month and its pause, for its view. */
export function hostEgressState(row: HostEgressColumns): HostEgressState {
  const notice = row.egress_budget_notice
    ? (JSON.parse(row.egress_budget_notice) as EgressBudgetNotice)
    : null;
  return {
    budget: notice && notice.month === monthOf(nowIso()) ? notice : null,
    throttle_bytes_per_second:
      row.egress_throttle_bytes_per_second === null ? null : Number(row.egress_throttle_bytes_per_second),
    paused:
      row.paused_reason && row.paused_at ? { reason: row.paused_reason, since: isoOut(row.paused_at) } : null,
  };
}
