import type { ServerResponse } from 'node:http';
import type { SseMessage } from '@ccp/api';
import type { Logger } from 'pino';
import type { ClusterBus } from '../shared/cluster-messages.js';
import type {
  LiveMessageRow,
  LiveMessagesRepository,
  NewLiveMessageRow,
} from '../store/live-messages-repository.js';
import type { SseHub, SseSubscriber } from './sse-hub.js';
import type { LiveSink } from './sse-projection.js';

/** Messages every gateway holds for resuming streams: the hub's replay buffer, filled from the table at start. */
const REPLAY = 1000;
/** Rows the table keeps; a gateway that falls further behind (its database unreachable) skips the rest. */
const KEEP = 10_000;
const READ_BATCH = 500;
/** Rows one read takes at most before letting other reads and appends in (it is queued again at once). */
const READS_PER_ROUND = 20;
const APPEND_BATCH = 500;
/** Messages waiting for the database; beyond this (the database stalled) new ones are dropped. */
const MAX_WAITING = 10_000;

/**
 * Live messages shared by the gateways on one PostgreSQL database. Every message is appended to the
 * `live_messages` table, whose seq numbers it for all gateways and is its SSE id; `live.appended` on the cluster
 * bus wakes each gateway, which reads the new rows in seq order and publishes them to its own hub with that seq. The
 * hub's replay buffer thus mirrors the newest rows, so a stream resumes at any gateway.
 */
export class LiveFeed implements LiveSink {
  private cursor = 0;
  /** The highest seq announced; a notice at or below the cursor needs no read. */
  private announced = 0;
  private reads: Promise<void> = Promise.resolve();
  private queuedRead: Promise<void> | null = null;
  private readAlways = false;
  private waiting: NewLiveMessageRow[] = [];
  private appending: Promise<void> | null = null;
  private closed = false;
  /** Messages not kept since the last warning, the database being too slow to take them. */
  private dropped = 0;

  constructor(
    private readonly hub: SseHub,
    private readonly repository: LiveMessagesRepository,
    private readonly cluster: ClusterBus,
    private readonly log: Logger,
  ) {}

  /** Loads the newest messages for resuming streams, then follows the table. */
  async start(): Promise<void> {
    for (const row of await this.repository.newest(REPLAY)) this.deliver(row);
    this.cluster.subscribe('live.appended', ({ seq }) => {
      if (seq <= this.cursor) return;
      this.announced = Math.max(this.announced, seq);
      void this.catchUp(false);
    });
    this.cluster.onMissed(() => void this.catchUp());
    // Rows appended while the newest were loading, before anything woke this feed.
    await this.catchUp();
  }

  /** Appends the message for every gateway; it reaches this gateway's streams, too, once read back. */
  publish(message: SseMessage, ownerUserId: string | null, userMessage: SseMessage = message): void {
    if (this.closed) return;
    if (this.waiting.length >= MAX_WAITING) {
      this.dropped++;
      return;
    }
    this.waiting.push({
      owner_user_id: ownerUserId,
      message: JSON.stringify(message),
      user_message: userMessage === message ? null : JSON.stringify(userMessage),
      created_at: new Date().toISOString(),
    });
    this.append();
  }

  /** Starts a stream like the hub does, once this gateway has read as far as the client's `lastEventId`. */
  attach(res: ServerResponse, subscriber: SseSubscriber, lastEventId: number | null): void {
    if (lastEventId === null || lastEventId <= this.cursor) {
      this.hub.attach(res, subscriber, lastEventId);
      return;
    }
    // The client saw a message at another gateway that this one has not read yet: attached now, it would get
    // that message again when read.
    void this.catchUp().then(() => {
      if (res.socket && !res.socket.destroyed) this.hub.attach(res, subscriber, lastEventId);
    });
  }

  /** Deletes rows beyond those kept. */
  prune(): Promise<number> {
    return this.repository.prune(KEEP);
  }

  /** Appends what is still waiting, then stops. */
  async close(): Promise<void> {
    for (let i = 0; this.appending && i <= MAX_WAITING / APPEND_BATCH; i++) await this.appending;
    this.closed = true;
    await this.reads;
  }

  /** One batch at a time, in order: a gateway's own messages keep the order they were published in. */
  private append(): void {
    if (this.appending || this.waiting.length === 0) return;
    const batch = this.waiting.splice(0, APPEND_BATCH);
    this.appending = this.repository
      .append(batch)
      .then((seq) => {
        // This gateway reads its own rows at once: it does not hear its own messages.
        this.announced = Math.max(this.announced, seq);
        void this.catchUp(false);
        return this.cluster.publish('live.appended', { seq });
      })
      .catch((error: unknown) =>
        this.log.warn({ err: error, messages: batch.length }, 'live messages could not be shared'),
      )
      .finally(() => {
        if (this.dropped > 0) {
          this.log.warn({ messages: this.dropped }, 'live messages dropped: the database fell behind');
          this.dropped = 0;
        }
        this.appending = null;
        this.append();
      });
  }

  /**
   * Queues a read of the rows above the cursor, unless one is queued and not started yet (it will see them too).
   * `always` false: skipped when the cursor has already passed every announced seq.
   */
  private catchUp(always = true): Promise<void> {
    this.readAlways ||= always;
    if (this.queuedRead) return this.queuedRead;
    const read = this.reads.then(() => {
      const needed = this.readAlways || this.cursor < this.announced;
      this.queuedRead = null;
      this.readAlways = false;
      if (needed && !this.closed) return this.readNew();
    });
    this.queuedRead = read.catch((error: unknown) =>
      this.log.warn({ err: error }, 'reading live messages failed; the next notice retries'),
    );
    this.reads = this.queuedRead;
    return this.queuedRead;
  }

  private async readNew(): Promise<void> {
    for (let round = 0; round < READS_PER_ROUND; round++) {
      const rows = await this.repository.after(this.cursor, READ_BATCH);
      for (const row of rows) this.deliver(row);
      if (rows.length < READ_BATCH) return;
    }
    void this.catchUp();
  }

  private deliver(row: LiveMessageRow): void {
    const message = JSON.parse(row.message) as SseMessage;
    const userMessage = row.user_message === null ? message : (JSON.parse(row.user_message) as SseMessage);
    this.hub.publish(message, row.owner_user_id, userMessage, row.seq);
    this.cursor = row.seq;
  }
}
