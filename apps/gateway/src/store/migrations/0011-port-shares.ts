import type { Kysely } from 'kysely';

/**
 * Ports of a workspace shared through the gateway, each on an origin of its own: a label (its host name under
 * SHARE_DOMAIN, and its cookie's name) and, where no DNS is available, one port of SHARE_PORTS. A revoked share
 * is deleted: the event log keeps what it was.
 */
export const portShares = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('port_shares')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('host_id', 'text', (c) => c.notNull())
      .addColumn('port', 'integer', (c) => c.notNull())
      .addColumn('label', 'text', (c) => c.notNull().unique())
      .addColumn('listen_port', 'integer', (c) => c.unique())
      .addColumn('user_ids', 'text', (c) => c.notNull())
      .addColumn('link_digest', 'text')
      .addColumn('link_expires_at', 'text')
      .addColumn('created_by', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('port_shares_host').on('port_shares').column('host_id').execute();
  },
};
