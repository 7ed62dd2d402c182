import type { Kysely } from 'kysely';

/** Failed secrets, counted by every gateway sharing the database (FailureRateLimiter). */
export const authFailures = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('auth_failures')
      .addColumn('key', 'text', (c) => c.notNull())
      .addColumn('at_ms', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex('auth_failures_key_at')
      .on('auth_failures')
      .columns(['key', 'at_ms'])
      .execute();
    await db.schema.createIndex('auth_failures_at').on('auth_failures').column('at_ms').execute();
  },
};
