import type { Kysely } from 'kysely';
import { sql } from 'kysely';

/** Tables for egress IPs, hosts, bindings and tasks, created early so statistics and cascades exist from the start. */
export const workspaces = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('egress_ips')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('label', 'text', (c) => c.notNull())
      .addColumn('ip_address', 'text', (c) => c.notNull())
      .addColumn('tunnel_type', 'text', (c) => c.notNull())
      .addColumn('provider', 'text', (c) => c.notNull())
      .addColumn('proxy_config_sealed', 'text', (c) => c.notNull())
      .addColumn('last_test', 'text')
      .addColumn('last_test_ok', 'integer')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();

    await db.schema
      .createTable('hosts')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('short_id', 'text', (c) => c.notNull().unique())
      .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('image', 'text')
      .addColumn('last_error', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addColumn('started_at', 'text')
      .execute();
    await db.schema.createIndex('hosts_user').on('hosts').column('user_id').execute();

    await db.schema
      .createTable('bindings')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('host_id', 'text', (c) => c.notNull().references('hosts.id').onDelete('cascade'))
      .addColumn('egress_ip_id', 'text', (c) => c.notNull().references('egress_ips.id').onDelete('restrict'))
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addUniqueConstraint('bindings_host_egress', ['host_id', 'egress_ip_id'])
      .execute();
    await db.schema.createIndex('bindings_egress').on('bindings').column('egress_ip_id').execute();

    await db.schema
      .createTable('tasks')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('kind', 'text', (c) => c.notNull())
      .addColumn('host_id', 'text', (c) => c.references('hosts.id').onDelete('set null'))
      .addColumn('user_id', 'text', (c) => c.references('users.id').onDelete('set null'))
      .addColumn('status', 'text', (c) =>
        c.notNull().check(sql`status in ('pending', 'running', 'succeeded', 'failed')`),
      )
      .addColumn('progress', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('stage', 'text', (c) => c.notNull().defaultTo(''))
      .addColumn('message', 'text', (c) => c.notNull().defaultTo(''))
      .addColumn('error_code', 'text')
      .addColumn('error_message', 'text')
      .addColumn('requested_by', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('started_at', 'text')
      .addColumn('finished_at', 'text')
      .execute();
    await db.schema.createIndex('tasks_status').on('tasks').columns(['status', 'created_at']).execute();
    await db.schema.createIndex('tasks_host').on('tasks').columns(['host_id', 'created_at']).execute();
  },
};
