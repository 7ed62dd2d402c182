import type { ServerResponse } from 'node:http';
import type { SseMessage, SseTopic } from '@ccp/api';

export interface SseSubscriber {
  role: 'admin' | 'user';
  userId: string;
  topics: ReadonlySet<SseTopic>;
}

interface Client extends SseSubscriber {
  res: ServerResponse;
}

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
}

/** Fans event-bus messages out to SSE clients, filtered by topic and, on user streams, by owner. */
export class SseHub {
  private readonly clients = new Set<Client>();
  private readonly buffer: Buffered[] = [];
  private seq = 0;
  private readonly heartbeat: NodeJS.Timeout;
  private readonly replayBufferSize: number;
  private readonly maxPendingBytes: number;
  droppedSlowClients = 0;

  constructor(options: SseHubOptions = {}) {
    this.replayBufferSize = options.replayBufferSize ?? 1000;
    this.maxPendingBytes = options.maxPendingBytes ?? 1024 * 1024;
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
    res.on('close', () => this.clients.delete(client));
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
