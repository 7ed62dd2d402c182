import pg from 'pg';
import type { ClusterTransport } from '../shared/cluster-messages.js';

/**
 * Tells a process when data it may hold in memory was changed by a write, its own or another process's.
 * Caches are only trusted while the feed is live: with SQLite always (the file belongs to one process); with
 * PostgreSQL while a LISTEN connection is up, since other gateways may write to the same database.
 */
export interface ChangeFeed extends ClusterTransport {
  readonly live: boolean;
  /** Announces that `topic` changed (after the write); `detail` (no more than a few hundred bytes) says what. */
  announce(topic: string, detail?: string): Promise<void>;
  /** `onChange` runs when another writer announces `topic` (with its detail), and whenever the feed drops or
   * comes back (without one). */
  subscribe(topic: string, onChange: (detail?: string) => void): void;
  close(): Promise<void>;
}

/** SQLite: this process is the only writer, so its own writes are all there is to hear about. */
export const singleWriterFeed: ChangeFeed = {
  live: true,
  announce: async () => {},
  subscribe: () => {},
  send: async () => {},
  listen: () => {},
  close: async () => {},
};

const CHANNEL = 'ccp_changes';
/** The topic the cluster messages (shared/cluster-messages.ts) travel on. */
const CLUSTER = 'cluster';

/** PostgreSQL LISTEN/NOTIFY on one channel; the payload is the topic, then a space and the detail if any.
 * PostgreSQL delivers a notice to its sender's own LISTEN connection too. */
export class PostgresChangeFeed implements ChangeFeed {
  private client: pg.Client | null = null;
  private connected = false;
  private closed = false;
  private retry: NodeJS.Timeout | null = null;
  private readonly subscribers = new Map<string, Set<(detail?: string) => void>>();

  constructor(
    private readonly clientConfig: pg.ClientConfig,
    private readonly query: (text: string, values: unknown[]) => Promise<unknown>,
  ) {}

  get live(): boolean {
    return this.connected;
  }

  async start(): Promise<void> {
    await this.connect().catch(() => this.scheduleRetry());
  }

  async announce(topic: string, detail?: string): Promise<void> {
    await this.query('select pg_notify($1, $2)', [CHANNEL, detail ? `${topic} ${detail}` : topic]);
  }

  subscribe(topic: string, onChange: (detail?: string) => void): void {
    const set = this.subscribers.get(topic) ?? new Set();
    set.add(onChange);
    this.subscribers.set(topic, set);
  }

  async send(text: string): Promise<void> {
    await this.announce(CLUSTER, text);
  }

  listen(onText: (text: string) => void, onMissed: () => void): void {
    this.subscribe(CLUSTER, (text) => (text === undefined ? onMissed() : onText(text)));
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retry) clearTimeout(this.retry);
    this.connected = false;
    await this.client?.end().catch(() => {});
  }

  private async connect(): Promise<void> {
    const client = new pg.Client(this.clientConfig);
    client.on('notification', (message) => {
      if (message.channel !== CHANNEL || !message.payload) return;
      const space = message.payload.indexOf(' ');
      if (space < 0) this.changed([message.payload]);
      else this.changed([message.payload.slice(0, space)], message.payload.slice(space + 1));
    });
    const lost = () => {
      if (this.client !== client) return;
      this.client = null;
      this.connected = false;
      this.changed([...this.subscribers.keys()]);
      client.end().catch(() => {});
      this.scheduleRetry();
    };
    client.on('error', lost);
    client.on('end', lost);
    this.client = client;
    await client.connect();
    await client.query(`listen ${CHANNEL}`);
    // Whatever changed while nobody listened is forgotten before caches are trusted again.
    this.changed([...this.subscribers.keys()]);
    this.connected = true;
  }

  private scheduleRetry(): void {
    if (this.closed || this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = null;
      this.connect().catch(() => {
        this.client = null;
        this.scheduleRetry();
      });
    }, 1000);
    this.retry.unref();
  }

  private changed(topics: string[], detail?: string): void {
    for (const topic of topics) for (const onChange of this.subscribers.get(topic) ?? []) onChange(detail);
  }
}
