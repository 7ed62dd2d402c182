import type { Kysely } from 'kysely';

/**
 * Bytes each host moved through its upstream, per hour and egress IP (the egress meter). No foreign keys: the
 * figures outlive the host, user or egress IP they name, until the event log's retention takes them.
 */
export const egressPolicyAndMetering = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('egress_traffic')
      .addColumn('hour', 'text', (c) => c.notNull())
      .addColumn('host_id', 'text', (c) => c.notNull())
      .addColumn('egress_ip_id', 'text', (c) => c.notNull())
      .addColumn('user_id', 'text', (c) => c.notNull())
      .addColumn('bytes_sent', 'bigint', (c) => c.notNull().defaultTo(0))
      .addColumn('bytes_received', 'bigint', (c) => c.notNull().defaultTo(0))
      .addPrimaryKeyConstraint('egress_traffic_pk', ['hour', 'host_id', 'egress_ip_id'])
      .execute();
    await db.schema.createIndex('egress_traffic_hour').on('egress_traffic').column('hour').execute();
  },
};
