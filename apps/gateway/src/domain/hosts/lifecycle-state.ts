import type {
  ActivitySignal,
  HostLifecycleState,
  LifecyclePolicy,
  StopReason,
  WeeklySchedule,
} from '@ccp/api';
import { isoOut } from '../../shared/clock.js';

/** A stored timestamp as milliseconds, and back. */
export const msOf = (iso: string | null): number | null => (iso === null ? null : Date.parse(iso));
export const isoOf = (at: number | null): string | null => (at === null ? null : new Date(at).toISOString());

/** The policy columns a host and a user both have. */
export interface PolicyColumns {
  idle_timeout_seconds: number | null;
  max_lifetime_seconds: number | null;
  schedule: string | null;
}

/** The lifecycle columns of a host row. */
export interface LifecycleColumns extends PolicyColumns {
  last_activity_at: string | null;
  last_activity_signal: string | null;
  planned_stop_at: string | null;
  planned_stop_reason: string | null;
  stop_warned_at: string | null;
  planned_start_at: string | null;
}

export function policyOf(row: PolicyColumns): LifecyclePolicy {
  return {
    idle_timeout_seconds: row.idle_timeout_seconds,
    max_lifetime_seconds: row.max_lifetime_seconds,
    schedule: row.schedule ? (JSON.parse(row.schedule) as WeeklySchedule) : null,
  };
}

export function policyColumns(policy: LifecyclePolicy): PolicyColumns {
  return {
    idle_timeout_seconds: policy.idle_timeout_seconds,
    max_lifetime_seconds: policy.max_lifetime_seconds,
    schedule: policy.schedule ? JSON.stringify(policy.schedule) : null,
  };
}

/** What a host's view says of its policy, its activity and the stop or start planned next. */
export function lifecycleState(row: LifecycleColumns): HostLifecycleState {
  return {
    policy: policyOf(row),
    last_activity_at: isoOut(row.last_activity_at),
    last_activity_signal: row.last_activity_signal as ActivitySignal | null,
    planned_stop:
      row.planned_stop_at && row.planned_stop_reason
        ? {
            at: isoOut(row.planned_stop_at),
            reason: row.planned_stop_reason as StopReason,
            warned_at: isoOut(row.stop_warned_at),
          }
        : null,
    planned_start_at: isoOut(row.planned_start_at),
  };
}
