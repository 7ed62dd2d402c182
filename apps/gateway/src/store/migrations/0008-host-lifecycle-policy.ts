import type { Kysely } from 'kysely';

/**
 * Hosts that keep their own cost in check: an idle timeout, a maximum lifetime and a weekly schedule per host,
 * with defaults per user (null: inherited); each host's last activity and the stop or start its policy plans.
 */
export const hostLifecyclePolicy = {
  async up(db: Kysely<unknown>): Promise<void> {
    // SQLite adds one column per statement.
    for (const table of ['hosts', 'users']) {
      await db.schema.alterTable(table).addColumn('idle_timeout_seconds', 'integer').execute();
      await db.schema.alterTable(table).addColumn('max_lifetime_seconds', 'integer').execute();
      // JSON of a WeeklySchedule.
      await db.schema.alterTable(table).addColumn('schedule', 'text').execute();
    }
    for (const column of [
      'last_activity_at',
      'last_activity_signal',
      'stop_extended_until',
      'planned_stop_at',
      'planned_stop_reason',
      'stop_warned_at',
      'planned_start_at',
      // Why the policy stopped the host last (idle, lifetime, schedule): what a refused login is told.
      'policy_stop_reason',
    ])
      await db.schema.alterTable('hosts').addColumn(column, 'text').execute();
  },
};
