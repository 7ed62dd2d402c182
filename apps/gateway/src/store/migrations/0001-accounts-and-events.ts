import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { autoIncrementColumn, autoIncrementConstraint, type MigrationDialect } from '../dialect.js';

export function accountsAndEvents(dialect: MigrationDialect) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable('users')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('username', 'text', (c) => c.notNull())
        .addColumn('username_key', 'text', (c) => c.notNull().unique())
        .addColumn('role', 'text', (c) => c.notNull().check(sql`role in ('admin', 'user')`))
        .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('active', 'disabled')`))
        .addColumn('password_hash', 'text', (c) => c.notNull())
        .addColumn('token_version', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('expires_at', 'text')
        .addColumn('expiry_handled_at', 'text')
        .addColumn('short_id', 'text', (c) => c.notNull().unique())
        .addColumn('ssh_user', 'text', (c) => c.notNull())
        .addColumn('ssh_pass_sealed', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('users_created_at').on('users').column('created_at').execute();

      await db.schema
        .createTable('ssh_keys')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('label', 'text', (c) => c.notNull())
        .addColumn('public_key', 'text', (c) => c.notNull())
        .addColumn('fingerprint', 'text', (c) => c.notNull())
        .addColumn('key_type', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addUniqueConstraint('ssh_keys_user_fingerprint', ['user_id', 'fingerprint'])
        .execute();

      // Events keep their user and host ids after those rows are deleted, so there are no foreign keys here.
      await db.schema
        .createTable('events')
        .addColumn('id', 'text', (c) => c.notNull().unique())
        .addColumn('seq', autoIncrementColumn(dialect), (c) => autoIncrementConstraint(dialect, c))
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('level', 'text', (c) => c.notNull())
        .addColumn('message', 'text', (c) => c.notNull())
        .addColumn('actor_kind', 'text', (c) => c.notNull())
        .addColumn('actor_id', 'text')
        .addColumn('actor_username', 'text')
        .addColumn('user_id', 'text')
        .addColumn('host_id', 'text')
        .addColumn('task_id', 'text')
        .addColumn('data', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('events_created_at').on('events').columns(['created_at', 'seq']).execute();
      await db.schema.createIndex('events_user').on('events').columns(['user_id', 'created_at']).execute();
      await db.schema.createIndex('events_host').on('events').columns(['host_id', 'created_at']).execute();
      await db.schema.createIndex('events_type').on('events').columns(['type', 'created_at']).execute();
    },
  };
}
