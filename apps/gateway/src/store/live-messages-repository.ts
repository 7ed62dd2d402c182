import { type Insertable, sql } from 'kysely';
import type { Db } from './database.js';
import type { LiveMessagesTable } from './schema.js';

export type NewLiveMessageRow = Omit<Insertable<LiveMessagesTable>, 'seq'>;

export interface LiveMessageRow {
  seq: number;
  owner_user_id: string | null;
  message: string;
  user_message: string | null;
}

/** Any constant the other advisory locks of this database do not use. */
const APPEND_LOCK = 0x6c697665; // 'live'

/**
 * The live (SSE) messages shared by gateways on one PostgreSQL database; SQLite keeps them in memory instead.
 * Readers take rows above the last seq they saw, so a row must never become visible after one with a higher seq.
 */
export class LiveMessagesRepository {
  constructor(private readonly db: Db) {}

  /**
   * Appends `rows` in order and returns the seq of the last. The lock makes concurrent appenders take seqs and
   * commit one after the other: without it, a seq taken earlier could commit after a later one was read.
   */
  async append(rows: NewLiveMessageRow[]): Promise<number> {
    return this.db.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(${APPEND_LOCK})`.execute(trx);
      const inserted = await trx.insertInto('live_messages').values(rows).returning('seq').execute();
      return Math.max(...inserted.map((row) => Number(row.seq)));
    });
  }

  /** Up to `limit` rows above `seq`, oldest first. */
  async after(seq: number, limit: number): Promise<LiveMessageRow[]> {
    const rows = await this.db
      .selectFrom('live_messages')
      .select(['seq', 'owner_user_id', 'message', 'user_message'])
      .where('seq', '>', seq)
      .orderBy('seq')
      .limit(limit)
      .execute();
    return rows.map((row) => ({ ...row, seq: Number(row.seq) }));
  }

  /** The newest `limit` rows, oldest first. */
  async newest(limit: number): Promise<LiveMessageRow[]> {
    const rows = await this.db
      .selectFrom('live_messages')
      .select(['seq', 'owner_user_id', 'message', 'user_message'])
      .orderBy('seq', 'desc')
      .limit(limit)
      .execute();
    return rows.reverse().map((row) => ({ ...row, seq: Number(row.seq) }));
  }

  /** Deletes all but the newest `keep` seqs; returns how many rows went. */
  async prune(keep: number): Promise<number> {
    const result = await this.db
      .deleteFrom('live_messages')
      .where('seq', '<=', (eb) =>
        eb.selectFrom('live_messages').select(sql<number>`max(seq) - ${keep}`.as('bound')),
      )
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
