import type { Kysely } from 'kysely';

/**
 * Monthly egress budgets per host, user and egress IP, what each month's warning and limit have already done,
 * and what a host's egress is held to now: the rate a reached budget throttles it to, and the pause of its
 * workspace while its exit is in doubt.
 */
export const egressBudgetsAndPause = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('egress_budgets')
      .addColumn('scope', 'text', (c) => c.notNull())
      .addColumn('subject_id', 'text', (c) => c.notNull())
      .addColumn('limit_bytes', 'bigint', (c) => c.notNull())
      .addColumn('warning_percent', 'integer', (c) => c.notNull())
      .addColumn('action', 'text', (c) => c.notNull())
      .addColumn('throttle_bytes_per_second', 'bigint', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('egress_budgets_pk', ['scope', 'subject_id'])
      .execute();
    // One row per budget and month once its warning share or limit was passed: users are told once a month.
    await db.schema
      .createTable('egress_budget_marks')
      .addColumn('scope', 'text', (c) => c.notNull())
      .addColumn('subject_id', 'text', (c) => c.notNull())
      .addColumn('month', 'text', (c) => c.notNull())
      .addColumn('warned_at', 'text')
      .addColumn('reached_at', 'text')
      .addPrimaryKeyConstraint('egress_budget_marks_pk', ['scope', 'subject_id', 'month'])
      .execute();
    // SQLite adds one column per statement.
    await db.schema.alterTable('hosts').addColumn('egress_throttle_bytes_per_second', 'bigint').execute();
    // JSON of the HostEgressState's budget: the warning or limit users were told of last (banner, live stream).
    await db.schema.alterTable('hosts').addColumn('egress_budget_notice', 'text').execute();
    await db.schema.alterTable('hosts').addColumn('paused_reason', 'text').execute();
    await db.schema.alterTable('hosts').addColumn('paused_at', 'text').execute();
  },
};
