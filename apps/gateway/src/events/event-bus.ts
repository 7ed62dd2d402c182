import type { Actor, LiveEvent, RecordedEvent } from '@ccp/api';
import type { EventLogWriter } from './event-log.js';
import { type InternalEvent, isRecorded } from './internal-events.js';
import type { SseProjection } from './sse-projection.js';

export const systemActor: Actor = { kind: 'system', id: null, username: null };

/** The events `emit` takes; live notices go through `notify`. */
export type BusEvent = RecordedEvent | InternalEvent;
type Handler<E extends BusEvent> = (event: E) => Promise<void> | void;

/**
 * The one event bus. Its subscribers: the event log (recorded events), the SSE projection (what live clients
 * see), and the internal reactions registered with `on`. The event map (@ccp/api event-map.ts, and
 * internal-events.ts) types every `emit`.
 */
export class EventBus {
  private readonly handlers = new Map<BusEvent['type'], Handler<BusEvent>[]>();

  constructor(
    private readonly eventLog: EventLogWriter,
    private readonly projection: SseProjection,
  ) {}

  /** Writes a recorded event's row, publishes its live message, then runs the internal reactions in turn. */
  async emit(event: BusEvent): Promise<void> {
    if (isRecorded(event)) await this.eventLog.write(event);
    this.projection.project(event);
    for (const handler of this.handlers.get(event.type) ?? []) await handler(event);
  }

  /** Publishes a live notice at once, without a log row (progress ticks that would flood the log). */
  notify(event: LiveEvent): void {
    this.projection.project(event);
  }

  /** Registers an internal reaction; reactions to one event run in the order registered. */
  on<K extends BusEvent['type']>(type: K, handler: Handler<Extract<BusEvent, { type: K }>>): void {
    const list = this.handlers.get(type) ?? [];
    list.push(handler as Handler<BusEvent>);
    this.handlers.set(type, list);
  }
}
