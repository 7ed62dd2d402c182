import type { Kysely } from 'kysely';

/**
 * One-time tickets live in the database, so a ticket issued by one gateway is taken at another sharing it, and
 * only once.
 */
export const accessTickets = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('access_tickets')
      .addColumn('digest', 'text', (c) => c.primaryKey())
      .addColumn('kind', 'text', (c) => c.notNull())
      .addColumn('granted', 'text', (c) => c.notNull())
      .addColumn('expires_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex('access_tickets_expires_at')
      .on('access_tickets')
      .column('expires_at')
      .execute();
  },
};
