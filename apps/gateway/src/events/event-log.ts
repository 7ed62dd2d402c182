import { randomUUID } from 'node:crypto';
import type { RecordedEvent } from '@ccp/api';
import type { Logger } from 'pino';
import { nowIso } from '../shared/clock.js';
import type { EventsRepository } from '../store/events-repository.js';

const SECRET_KEY = /pass|secret|token|private|credential|uuid/i;

/** Secrets must never reach the event log: any field that looks like one is replaced before writing. */
function scrub(data: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(data)) {
    if (SECRET_KEY.test(key)) out[key] = '[redacted]';
    else if (value && typeof value === 'object' && !Array.isArray(value)) {
      out[key] = scrub(value as Record<string, unknown>);
    } else out[key] = value;
  }
  return out;
}

/** The bus's subscriber that writes each recorded event as an event-log row and a log line. */
export class EventLogWriter {
  constructor(
    private readonly events: EventsRepository,
    private readonly log: Logger,
  ) {}

  async write(event: RecordedEvent): Promise<void> {
    const data = scrub('data' in event ? event.data : {});
    const level = event.level ?? 'info';
    await this.events.insert({
      id: randomUUID(),
      type: event.type,
      level,
      message: event.message,
      actor_kind: event.actor.kind,
      actor_id: event.actor.id,
      actor_username: event.actor.username,
      user_id: event.userId ?? null,
      host_id: event.hostId ?? null,
      task_id: event.taskId ?? null,
      data: JSON.stringify(data),
      created_at: nowIso(),
    });
    this.log[level](
      { event: event.type, actor: event.actor, userId: event.userId, hostId: event.hostId, data },
      event.message,
    );
  }
}
