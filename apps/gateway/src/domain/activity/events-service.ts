import type { EventQuery, EventRecord } from '@ccp/api';
import { toIso } from '../../shared/clock.js';
import type { EventRow, EventsRepository } from '../../store/events-repository.js';
import { errors } from '../errors.js';

const eventView = (row: EventRow): EventRecord => ({
  id: row.id,
  type: row.type,
  level: row.level,
  message: row.message,
  actor: { kind: row.actor_kind, id: row.actor_id, username: row.actor_username },
  user_id: row.user_id,
  host_id: row.host_id,
  task_id: row.task_id,
  data: JSON.parse(row.data) as Record<string, unknown>,
  // Shown as stored, fixed-width with milliseconds: event times sort as text (without `.000`, a whole second
  // would sort after the rest of that second).
  created_at: row.created_at,
});

/** Reads the event log; writing goes through the event bus. */
export class EventsService {
  constructor(private readonly events: EventsRepository) {}

  async query(query: EventQuery) {
    const since = query.since ? toIso(query.since, 'since') : undefined;
    const until = query.until ? toIso(query.until, 'until') : undefined;
    if (since && until && since > until) {
      throw errors.validation([{ field: 'since', message: 'must not be after until' }]);
    }
    const limit = query.limit ?? 50;
    const offset = query.offset ?? 0;
    const { rows, total } = await this.events.query({
      limit,
      offset,
      userId: query.user_id?.toLowerCase(),
      hostId: query.host_id?.toLowerCase(),
      type: query.type,
      since,
      // `until` is inclusive to the millisecond the caller gave.
      until,
    });
    return { events: rows.map(eventView), total, limit, offset };
  }

  async prune(retentionDays: number): Promise<number> {
    return this.events.deleteOlderThan(new Date(Date.now() - retentionDays * 86_400_000).toISOString());
  }
}
