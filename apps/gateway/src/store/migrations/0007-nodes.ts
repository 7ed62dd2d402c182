import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { autoIncrementConstraint, bigAutoIncrementColumn, type MigrationDialect } from '../dialect.js';

/**
 * Several gateways on one database: each registers as a node, hosts and their tasks belong to one node, and
 * live messages (SSE) are numbered by the database so a stream resumes at any gateway.
 */
export function nodes(dialect: MigrationDialect) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable('nodes')
        .addColumn('name', 'text', (c) => c.primaryKey())
        .addColumn('instance_id', 'text', (c) => c.notNull())
        .addColumn('internal_address', 'text')
        .addColumn('memory_mb', 'integer', (c) => c.notNull())
        .addColumn('cpus', 'integer', (c) => c.notNull())
        .addColumn('max_hosts', 'integer', (c) => c.notNull())
        .addColumn('images_ready', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('started_at', 'text', (c) => c.notNull())
        .addColumn('heartbeat_at', 'text', (c) => c.notNull())
        .addColumn('left_at', 'text')
        .addColumn('silence_reported', 'integer', (c) => c.notNull().defaultTo(0))
        .execute();
      // SQLite adds one column per statement.
      await db.schema.alterTable('hosts').addColumn('node', 'text').execute();
      // A host's status before its node went silent, given back when the node returns.
      await db.schema.alterTable('hosts').addColumn('status_before_node_loss', 'text').execute();
      await db.schema.alterTable('tasks').addColumn('node', 'text').execute();
      await db.schema.alterTable('tasks').addColumn('claimed_at', 'text').execute();
      await db.schema.alterTable('tasks').addColumn('cancel_reason', 'text').execute();
      await db.schema.alterTable('tasks').addColumn('request', 'text').execute();
      // One unfinished task per host, held by the database for every gateway that shares it.
      await db.schema
        .createIndex('tasks_one_active_per_host')
        .unique()
        .on('tasks')
        .column('host_id')
        .where(sql.ref('status'), 'in', sql`('pending', 'running')`)
        .execute();
      await db.schema.createIndex('tasks_queue').on('tasks').columns(['node', 'status']).execute();
      await db.schema.createIndex('hosts_node').on('hosts').column('node').execute();
      // Progress ticks number many messages: a 32-bit seq could run out within weeks of a busy cluster.
      await db.schema
        .createTable('live_messages')
        .addColumn('seq', bigAutoIncrementColumn(dialect), (c) => autoIncrementConstraint(dialect, c))
        .addColumn('owner_user_id', 'text')
        .addColumn('message', 'text', (c) => c.notNull())
        .addColumn('user_message', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();
    },
  };
}
