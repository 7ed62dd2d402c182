import type { Kysely } from 'kysely';

/**
 * Resources per host and quotas per user. A host's cpus, memory, pids and home size are its own where set (null:
 * its owner's default, else the gateway's setting); a user's defaults and quotas are null where unset (quotas:
 * unlimited). Resource alerts are what the last check of a running host found short (JSON, `[]` when nothing).
 */
export function resourcesAndQuotas() {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      // SQLite adds one column per statement.
      for (const table of ['hosts', 'users'] as const) {
        const prefix = table === 'users' ? 'default_' : '';
        await db.schema.alterTable(table).addColumn(`${prefix}cpus`, 'double precision').execute();
        await db.schema.alterTable(table).addColumn(`${prefix}memory_mb`, 'integer').execute();
        await db.schema.alterTable(table).addColumn(`${prefix}pids`, 'integer').execute();
        await db.schema.alterTable(table).addColumn(`${prefix}home_mb`, 'integer').execute();
      }
      await db.schema.alterTable('hosts').addColumn('resource_alerts', 'text').execute();
      for (const quota of ['hosts', 'running_hosts', 'memory_mb', 'home_mb'])
        await db.schema.alterTable('users').addColumn(`quota_${quota}`, 'integer').execute();
      await db.schema.alterTable('users').addColumn('quota_cpus', 'double precision').execute();
    },
  };
}
