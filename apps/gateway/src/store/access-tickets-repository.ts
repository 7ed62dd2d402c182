import type { Selectable } from 'kysely';
import type { Db } from './database.js';
import type { AccessTicketsTable } from './schema.js';

export type AccessTicketRow = Selectable<AccessTicketsTable>;

export class AccessTicketsRepository {
  constructor(private readonly db: Db) {}

  async insert(row: AccessTicketRow): Promise<void> {
    await this.db.insertInto('access_tickets').values(row).execute();
  }

  /** Inserts the row unless one with its digest exists; true when this call inserted it (once across gateways). */
  async insertOnce(row: AccessTicketRow): Promise<boolean> {
    const inserted = await this.db
      .insertInto('access_tickets')
      .values(row)
      .onConflict((conflict) => conflict.column('digest').doNothing())
      .returning('digest')
      .executeTakeFirst();
    return inserted !== undefined;
  }

  /**
   * Removes the ticket of this kind and returns it: one statement, so of two gateways taking it at once only one
   * gets it. A row of another kind stays (a secret never spends another kind's ticket or mark).
   */
  async take(digest: string, kind: string): Promise<AccessTicketRow | undefined> {
    return this.db
      .deleteFrom('access_tickets')
      .where('digest', '=', digest)
      .where('kind', '=', kind)
      .returningAll()
      .executeTakeFirst();
  }

  async deleteExpired(now: string): Promise<void> {
    await this.db.deleteFrom('access_tickets').where('expires_at', '<=', now).execute();
  }
}
