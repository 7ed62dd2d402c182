import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { Kysely, type Migration, Migrator, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import { type ChangeFeed, PostgresChangeFeed, singleWriterFeed } from './change-feed.js';
import type { DialectKind } from './dialect.js';
import { accountsAndEvents } from './migrations/0001-accounts-and-events.js';
import { workspaces } from './migrations/0002-workspaces.js';
import { hostKeys } from './migrations/0003-host-keys.js';
import { listIndexes } from './migrations/0004-list-indexes.js';
import { accessTickets } from './migrations/0005-access-tickets.js';
import { authFailures } from './migrations/0006-auth-failures.js';
import { nodes } from './migrations/0007-nodes.js';
import { hostLifecyclePolicy } from './migrations/0008-host-lifecycle-policy.js';
import { resourcesAndQuotas } from './migrations/0009-resources-and-quotas.js';
import { egressPolicyAndMetering } from './migrations/0010-egress-policy-and-metering.js';
import { portShares } from './migrations/0011-port-shares.js';
import { egressPolicyPerHost } from './migrations/0012-egress-policy-per-host.js';
import { egressDecisions } from './migrations/0013-egress-decisions.js';
import { egressBudgetsAndPause } from './migrations/0014-egress-budgets-and-pause.js';
import type { DatabaseSchema } from './schema.js';
import type { DatabaseConfig } from './settings.js';

export type Db = Kysely<DatabaseSchema>;

export interface Database {
  db: Db;
  kind: DialectKind;
  /** How this gateway reaches the others on the database, and whether cached reads are still good: see
   * change-feed.ts. */
  changes: ChangeFeed;
  ping(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

function openSqlite(file: string): Kysely<DatabaseSchema> {
  if (file !== ':memory:') mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  return new Kysely<DatabaseSchema>({
    dialect: new SqliteDialect({
      // Kysely's SQLite dialect keeps a single connection; the pragmas below are set on it when it opens.
      database: async () => {
        const connection = new SqliteDatabase(file);
        connection.pragma('journal_mode = WAL');
        connection.pragma('foreign_keys = ON');
        connection.pragma('busy_timeout = 5000');
        connection.pragma('synchronous = NORMAL');
        return withStatementCache(connection);
      },
    }),
  });
}

/** Kysely prepares every query anew; reusing prepared statements by SQL text halves a simple request's cost. */
function withStatementCache(connection: SqliteDatabase.Database, limit = 500): SqliteDatabase.Database {
  const prepare = connection.prepare.bind(connection);
  const cache = new Map<string, SqliteDatabase.Statement>();
  connection.prepare = ((source: string) => {
    let statement = cache.get(source);
    if (!statement) {
      statement = prepare(source);
      if (cache.size >= limit) cache.delete(cache.keys().next().value!);
      cache.set(source, statement);
    }
    return statement;
  }) as typeof connection.prepare;
  return connection;
}

function openPostgres(config: Extract<DatabaseConfig, { kind: 'postgres' }>): {
  db: Kysely<DatabaseSchema>;
  changes: PostgresChangeFeed;
} {
  const ssl =
    config.sslMode === 'disable'
      ? false
      : config.sslMode === 'require'
        ? { rejectUnauthorized: false }
        : {
            rejectUnauthorized: true,
            ...(config.sslRootCert ? { ca: readFileSync(config.sslRootCert, 'utf8') } : {}),
          };
  const pool = new pg.Pool({
    connectionString: config.connectionString,
    ssl,
    max: 10,
    connectionTimeoutMillis: 5000,
    idleTimeoutMillis: 30000,
  });
  // An idle client losing its connection (server restart) must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  const changes = new PostgresChangeFeed(
    { connectionString: config.connectionString, ssl, connectionTimeoutMillis: 5000 },
    (text, values) => pool.query(text, values),
  );
  return { db: new Kysely<DatabaseSchema>({ dialect: new PostgresDialect({ pool }) }), changes };
}

function migrations(kind: DialectKind): Record<string, Migration> {
  const dialect = { kind };
  return {
    '0001-accounts-and-events': accountsAndEvents(dialect),
    '0002-workspaces': workspaces,
    '0003-host-keys': hostKeys,
    '0004-list-indexes': listIndexes,
    '0005-access-tickets': accessTickets,
    '0006-auth-failures': authFailures,
    '0007-nodes': nodes(dialect),
    '0008-host-lifecycle-policy': hostLifecyclePolicy,
    '0009-resources-and-quotas': resourcesAndQuotas(),
    '0010-egress-policy-and-metering': egressPolicyAndMetering,
    '0011-port-shares': portShares,
    '0012-egress-policy-per-host': egressPolicyPerHost,
    '0013-egress-decisions': egressDecisions,
    '0014-egress-budgets-and-pause': egressBudgetsAndPause,
  };
}

export async function openDatabase(config: DatabaseConfig): Promise<Database> {
  const kind: DialectKind = config.kind;
  const { db, changes } =
    config.kind === 'sqlite'
      ? { db: openSqlite(config.file), changes: singleWriterFeed }
      : openPostgres(config);
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations(kind) } });
  const { error, results } = await migrator.migrateToLatest();
  if (error) {
    await db.destroy();
    const failed = results?.find((r) => r.status === 'Error');
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(`database migration ${failed?.migrationName ?? ''} failed: ${reason}`);
  }
  if (changes instanceof PostgresChangeFeed) await changes.start();
  return {
    db,
    kind,
    changes,
    async ping(timeoutMs = 3000) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('database did not answer in time')), timeoutMs);
      });
      try {
        await Promise.race([sql`select 1`.execute(db), timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
    async close() {
      await changes.close();
      await db.destroy();
    },
  };
}
