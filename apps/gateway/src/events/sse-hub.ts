import type { ServerResponse } from 'node:http';
import type { SseMessage, SseTopic } from '@ccp/api';

export interface SseSubscriber {
  role: 'admin' | 'user';
  userId: string;
  topics: ReadonlySet<SseTopic>;
  /** The account's token version when the stream was opened: the stream ends when it moves on. */
  tokenVersion: number;
  /** When the token that opened the stream expires (epoch ms): the stream ends then. */
  expiresAt: number | null;
}

interface Client extends SseSubscriber {
  res: ServerResponse;
}

/** setTimeout's longest wait (about 24.8 days); a later expiry is met by the heartbeat's re-check. */
const LONGEST_TIMER_MS = 2 ** 31 - 1;

interface Buffered {
  seq: number;
  message: SseMessage;
  ownerUserId: string | null;
  /** The wire frames, built once for every client: admin streams get `frame`, user streams `userFrame`. */
  frame: string;
  userFrame: string;
}

export interface SseHubOptions {
  heartbeatMs?: number;
  replayBufferSize?: number;
  /** A client whose socket holds more unsent bytes than this is dropped, so it never slows the others. */
  maxPendingBytes?: number;
  /**
   * Whether a stream's holder still holds its rights (same role and token version, account enabled): asked at
   * every heartbeat, once per holder, for what no revocation announced (a role change, a notice the feed lost).
   */
  stillHolds?: (subscriber: SseSubscriber) => Promise<boolean>;
}

/** Fans event-bus messages out to SSE clients, filtered by topic and, on user streams, by owner. */
export class SseHub {
  private readonly clients = new Set<Client>();
  private readonly buffer: Buffered[] = [];
  private seq = 0;
  private readonly heartbeat: NodeJS.Timeout;
  private readonly replayBufferSize: number;
  private readonly maxPendingBytes: number;
  private readonly stillHolds: SseHubOptions['stillHolds'];
  private rechecking = false;
  droppedSlowClients = 0;

  constructor(options: SseHubOptions = {}) {
    this.replayBufferSize = options.replayBufferSize ?? 1000;
    this.maxPendingBytes = options.maxPendingBytes ?? 1024 * 1024;
    this.stillHolds = options.stillHolds;
    this.heartbeat = setInterval(() => this.beat(), options.heartbeatMs ?? 15_000);
    this.heartbeat.unref();
  }

  get size(): number {
    return this.clients.size;
  }

  /** Starts a stream on `res`, replaying buffered messages newer than `lastEventId`. */
  attach(res: ServerResponse, subscriber: SseSubscriber, lastEventId: number | null): void {
    const client: Client = { ...subscriber, res };
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.write(': connected\n\n');
    this.clients.add(client);
    const expiry =
      subscriber.expiresAt === null
        ? null
        : setTimeout(
            () => this.drop(client),
            Math.min(LONGEST_TIMER_MS, Math.max(0, subscriber.expiresAt - Date.now())),
          );
    expiry?.unref();
    res.on('close', () => {
      if (expiry) clearTimeout(expiry);
      this.clients.delete(client);
    });
    if (lastEventId !== null) {
      for (const entry of this.buffer) {
        if (entry.seq > lastEventId && this.wants(client, entry)) this.send(client, entry);
      }
    }
  }

  /**
   * Sends `message` to admin streams and, as `userMessage`, to the stream of `ownerUserId` (null: nobody else).
   * `seq`, its id, must be above every earlier one: the hub's own count by default, the database's with PostgreSQL.
   */
  publish(
    message: SseMessage,
    ownerUserId: string | null,
    userMessage: SseMessage = message,
    seq = this.seq + 1,
  ): void {
    this.seq = seq;
    const frameOf = (data: SseMessage) => `event: message\nid: ${seq}\ndata: ${JSON.stringify(data)}\n\n`;
    const frame = frameOf(message);
    const entry: Buffered = {
      seq,
      message,
      ownerUserId,
      frame,
      userFrame: userMessage === message ? frame : frameOf(userMessage),
    };
    this.buffer.push(entry);
    if (this.buffer.length > this.replayBufferSize) this.buffer.shift();
    for (const client of this.clients) {
      if (this.wants(client, entry)) this.send(client, entry);
    }
  }

  /** Ends the streams of one user (disabled, expired, deleted). */
  closeForUser(userId: string): void {
    for (const client of this.clients) {
      if (client.userId === userId) this.drop(client);
    }
  }

  closeAll(): void {
    clearInterval(this.heartbeat);
    for (const client of this.clients) this.drop(client);
  }

  private wants(client: Client, entry: Buffered): boolean {
    if (!client.topics.has(entry.message.topic)) return false;
    return client.role === 'admin' || entry.ownerUserId === client.userId;
  }

  private send(client: Client, entry: Buffered): void {
    this.write(client, client.role === 'admin' ? entry.frame : entry.userFrame);
  }

  private beat(): void {
    for (const client of this.clients) this.write(client, ': heartbeat\n\n');
    void this.recheck();
  }

  /** Ends the streams whose token expired or whose holder lost the rights that opened them. */
  private async recheck(): Promise<void> {
    if (this.rechecking || !this.stillHolds) return;
    this.rechecking = true;
    try {
      const byHolder = new Map<string, Client[]>();
      for (const client of this.clients) {
        if (client.expiresAt !== null && client.expiresAt <= Date.now()) this.drop(client);
        else {
          const key = `${client.userId} ${client.role} ${client.tokenVersion}`;
          byHolder.set(key, [...(byHolder.get(key) ?? []), client]);
        }
      }
      for (const clients of byHolder.values()) {
        const holds = await this.stillHolds(clients[0]!).catch(() => true); // a database hiccup ends nothing
        if (!holds) for (const client of clients) this.drop(client);
      }
    } finally {
      this.rechecking = false;
    }
  }

  private write(client: Client, frame: string): void {
    if (client.res.writableLength > this.maxPendingBytes) {
      this.droppedSlowClients++;
      this.drop(client);
      return;
    }
    client.res.write(frame);
  }

  private drop(client: Client): void {
    this.clients.delete(client);
    client.res.end();
    client.res.socket?.destroySoon();
  }
}
