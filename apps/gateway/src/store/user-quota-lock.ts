import { sql } from 'kysely';
import type { Db } from './database.js';
import type { DialectKind } from './dialect.js';
import { HostsRepository, type HostWithOwner } from './hosts-repository.js';
import { TasksRepository } from './tasks-repository.js';
import type { UserRow } from './users-repository.js';

/** What a quota check reads and writes while it holds a user's lock. */
export interface QuotaScope {
  /** The user as stored now (undefined once deleted). */
  user: UserRow | undefined;
  hosts: HostWithOwner[];
  /** The user's hosts with a start or bootstrap task queued or running: the quotas count them as running. */
  startsUnderway: Set<string>;
  /** Writes inside the lock: the reservation (a host's row, a start task's row) is committed with it. */
  writes: { hosts: HostsRepository; tasks: TasksRepository };
}

/**
 * One quota check at a time per user, for every gateway on the database: the check and the row that reserves
 * what it let through commit together, and the next check of that user waits for the commit and sees that row.
 * PostgreSQL: a transaction locking the user's row (`FOR UPDATE`). SQLite: an immediate transaction (the write
 * lock from its first statement), on Kysely's single connection, which other queries wait for meanwhile.
 */
export class UserQuotaLock {
  constructor(
    private readonly db: Db,
    private readonly kind: DialectKind,
  ) {}

  /** Runs `work` holding the user's lock; it commits when `work` resolves and rolls back when it throws. */
  hold<T>(userId: string, work: (scope: QuotaScope) => Promise<T>): Promise<T> {
    return this.db.connection().execute(async (connection) => {
      await sql.raw(this.kind === 'sqlite' ? 'begin immediate' : 'begin').execute(connection);
      try {
        const user = await connection
          .selectFrom('users')
          .selectAll()
          .where('id', '=', userId)
          .$if(this.kind === 'postgres', (query) => query.forUpdate())
          .executeTakeFirst();
        const hosts = new HostsRepository(connection);
        const tasks = new TasksRepository(connection, this.kind);
        const result = await work({
          user,
          hosts: await hosts.list({ userId }),
          startsUnderway: new Set(await tasks.hostsWithStartUnderway(userId)),
          writes: { hosts, tasks },
        });
        await sql.raw('commit').execute(connection);
        return result;
      } catch (error) {
        await sql
          .raw('rollback')
          .execute(connection)
          .catch(() => {});
        throw error;
      }
    });
  }
}
