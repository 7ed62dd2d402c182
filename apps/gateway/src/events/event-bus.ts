import { randomUUID } from 'node:crypto';
import type { Actor, EventLevel, SseMessage } from '@ccp/api';
import type { Logger } from 'pino';
import { nowIso } from '../domain/clock.js';
import type { EventsRepository } from '../store/events-repository.js';
import type { SseHub } from './sse-hub.js';

export interface EventInput {
  type: string;
  level?: EventLevel;
  message: string;
  actor: Actor;
  userId?: string | null;
  hostId?: string | null;
  taskId?: string | null;
  data?: Record<string, unknown>;
  /** The live notification for SSE clients; `ownerUserId` decides which user stream also sees it. */
  sse?: { message: SseMessage; ownerUserId: string | null };
}

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

export const systemActor: Actor = { kind: 'system', id: null, username: null };

/** One emit writes the event-log row, logs it, and fans the live message out to SSE. */
export class EventBus {
  constructor(
    private readonly events: EventsRepository,
    private readonly hub: SseHub,
    private readonly log: Logger,
  ) {}

  async emit(input: EventInput): Promise<void> {
    const data = scrub(input.data ?? {});
    const level = input.level ?? 'info';
    await this.events.insert({
      id: randomUUID(),
      type: input.type,
      level,
      message: input.message,
      actor_kind: input.actor.kind,
      actor_id: input.actor.id,
      actor_username: input.actor.username,
      user_id: input.userId ?? null,
      host_id: input.hostId ?? null,
      task_id: input.taskId ?? null,
      data: JSON.stringify(data),
      created_at: nowIso(),
    });
    this.log[level](
      { event: input.type, actor: input.actor, userId: input.userId, hostId: input.hostId, data },
      input.message,
    );
    if (input.sse) this.hub.publish(input.sse.message, input.sse.ownerUserId);
  }

  /** Publishes a live message without a log row (progress ticks that would flood the log). */
  notify(message: SseMessage, ownerUserId: string | null): void {
    this.hub.publish(message, ownerUserId);
  }
}
