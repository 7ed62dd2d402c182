import pg from 'pg';
import type { ClusterTransport } from '../shared/cluster-messages.js';

/**
 * How the gateways sharing one database reach each other: it carries the cluster bus's messages
 * (shared/cluster-messages.ts). Caches are only trusted while the feed is live: with SQLite always (the file
 * belongs to one process); with PostgreSQL while a LISTEN connection is up, since other gateways may write to the
 * same database.
 */
export interface ChangeFeed extends ClusterTransport {
  close(): Promise<void>;
}

/** SQLite: this process is the only writer, so there is nobody to tell and nothing to hear. */
export const singleWriterFeed: ChangeFeed = {
  live: true,
  send: async () => {},
  listen: () => {},
  close: async () => {},
};

const CHANNEL = 'ccp_changes';

interface Listener {
  onText: (text: string) => void;
  onMissed: () => void;
}

/** PostgreSQL LISTEN/NOTIFY on one channel, a message per notice. PostgreSQL delivers a notice to its sender's
 * own LISTEN connection too. */
export class PostgresChangeFeed implements ChangeFeed {
  private client: pg.Client | null = null;
  private connected = false;
  private closed = false;
  private retry: NodeJS.Timeout | null = null;
  private readonly listeners: Listener[] = [];

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

  /** `text` must stay under PostgreSQL's 8000 bytes per notice. */
  async send(text: string): Promise<void> {
    await this.query('select pg_notify($1, $2)', [CHANNEL, text]);
  }

  listen(onText: (text: string) => void, onMissed: () => void): void {
    this.listeners.push({ onText, onMissed });
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
      for (const listener of this.listeners) listener.onText(message.payload);
    });
    const lost = () => {
      if (this.client !== client) return;
      this.client = null;
      this.connected = false;
      this.missed();
      client.end().catch(() => {});
      this.scheduleRetry();
    };
    client.on('error', lost);
    client.on('end', lost);
    this.client = client;
    await client.connect();
    await client.query(`listen ${CHANNEL}`);
    // Whatever changed while nobody listened is forgotten before caches are trusted again.
    this.missed();
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

  private missed(): void {
    for (const listener of this.listeners) listener.onMissed();
  }
}
