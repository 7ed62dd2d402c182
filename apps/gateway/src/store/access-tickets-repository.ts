import type { Selectable } from 'kysely';
import type { Db } from './database.js';
import type { AccessTicketsTable } from './schema.js';

export type AccessTicketRow = Selectable<AccessTicketsTable>;

export class AccessTicketsRepository {
  constructor(private readonly db: Db) {}

  async insert(row: AccessTicketRow): Promise<void> {
    await this.db.insertInto('access_tickets').values(row).execute();
  }

  /** Removes the ticket and returns it: one statement, so of two gateways taking it at once only one gets it. */
  async take(digest: string): Promise<AccessTicketRow | undefined> {
    return this.db
      .deleteFrom('access_tickets')
      .where('digest', '=', digest)
      .returningAll()
      .executeTakeFirst();
  }

  async deleteExpired(now: string): Promise<void> {
    await this.db.deleteFrom('access_tickets').where('expires_at', '<=', now).execute();
  }
}
