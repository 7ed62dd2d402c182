import type { Db } from './database.js';

/** The failure log in the database (the rate limiter's FailureLog), shared by every gateway using it. */
export class AuthFailuresRepository {
  constructor(private readonly db: Db) {}

  async add(keys: readonly string[], at: number): Promise<void> {
    if (keys.length === 0) return;
    await this.db
      .insertInto('auth_failures')
      .values(keys.map((key) => ({ key, at_ms: at })))
      .execute();
  }

  async timesAfter(key: string, after: number): Promise<number[]> {
    const rows = await this.db
      .selectFrom('auth_failures')
      .select('at_ms')
      .where('key', '=', key)
      .where('at_ms', '>', after)
      .orderBy('at_ms')
      .execute();
    // PostgreSQL's bigint arrives as a string.
    return rows.map((row) => Number(row.at_ms));
  }

  async clear(key: string): Promise<void> {
    await this.db.deleteFrom('auth_failures').where('key', '=', key).execute();
  }

  async prune(before: number): Promise<void> {
    await this.db.deleteFrom('auth_failures').where('at_ms', '<=', before).execute();
  }
}
