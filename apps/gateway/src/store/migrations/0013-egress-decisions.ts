import type { Kysely } from 'kysely';

/**
 * What each host's egress policy blocked, or in log-only mode would have blocked: counts per minute,
 * destination and port, and per minute how many went uncounted past the cap on destinations. No foreign keys:
 * like the egress figures, the rows outlive their host until the event log's retention takes them.
 */
export const egressDecisions = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('egress_decisions')
      .addColumn('minute', 'text', (c) => c.notNull())
      .addColumn('host_id', 'text', (c) => c.notNull())
      .addColumn('user_id', 'text', (c) => c.notNull())
      .addColumn('decision', 'text', (c) => c.notNull())
      .addColumn('destination', 'text', (c) => c.notNull())
      .addColumn('port', 'integer', (c) => c.notNull())
      .addColumn('count', 'bigint', (c) => c.notNull())
      .addColumn('last_seen', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('egress_decisions_pk', [
        'host_id',
        'minute',
        'decision',
        'destination',
        'port',
      ])
      .execute();
    await db.schema.createIndex('egress_decisions_minute').on('egress_decisions').column('minute').execute();
    await db.schema
      .createTable('egress_decisions_uncounted')
      .addColumn('minute', 'text', (c) => c.notNull())
      .addColumn('host_id', 'text', (c) => c.notNull())
      .addColumn('destinations', 'integer', (c) => c.notNull())
      .addColumn('count', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('egress_decisions_uncounted_pk', ['host_id', 'minute'])
      .execute();
  },
};
