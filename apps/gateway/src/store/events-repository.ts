import type { Insertable, Selectable } from 'kysely';
import type { Db } from './database.js';
import type { EventsTable } from './schema.js';

export type EventRow = Selectable<EventsTable>;

export interface EventFilter {
  limit: number;
  offset: number;
  userId?: string;
  hostId?: string;
  type?: string;
  since?: string;
  until?: string;
}

export class EventsRepository {
  constructor(private readonly db: Db) {}

  async insert(row: Insertable<EventsTable>): Promise<void> {
    await this.db.insertInto('events').values(row).execute();
  }

  async query(filter: EventFilter): Promise<{ rows: EventRow[]; total: number }> {
    let base = this.db.selectFrom('events');
    if (filter.userId) base = base.where('user_id', '=', filter.userId);
    if (filter.hostId) base = base.where('host_id', '=', filter.hostId);
    if (filter.type) base = base.where('type', '=', filter.type);
    if (filter.since) base = base.where('created_at', '>=', filter.since);
    if (filter.until) base = base.where('created_at', '<=', filter.until);
    const [rows, count] = await Promise.all([
      base
        .selectAll()
        .orderBy('created_at', 'desc')
        .orderBy('seq', 'desc')
        .limit(filter.limit)
        .offset(filter.offset)
        .execute(),
      base.select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow(),
    ]);
    return { rows, total: Number(count.n) };
  }

  async deleteOlderThan(cutoff: string): Promise<number> {
    const result = await this.db.deleteFrom('events').where('created_at', '<', cutoff).executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
