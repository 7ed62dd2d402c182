import type { Kysely } from 'kysely';

/** Lists are ordered by (created_at, id); an index on both lets them be read in order without a sort. */
export const listIndexes = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.dropIndex('users_created_at').execute();
    await db.schema.createIndex('users_created_id').on('users').columns(['created_at', 'id']).execute();
    await db.schema.createIndex('hosts_created_id').on('hosts').columns(['created_at', 'id']).execute();
    await db.schema
      .createIndex('egress_ips_created_id')
      .on('egress_ips')
      .columns(['created_at', 'id'])
      .execute();
  },
};
