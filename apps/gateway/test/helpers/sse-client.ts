import http from 'node:http';

export interface SseFrame {
  event?: string;
  id?: string;
  data?: string;
  comment?: string;
}

/** A minimal real SSE client over node:http that records every frame it reads. */
export class SseClient {
  readonly frames: SseFrame[] = [];
  status = 0;
  ended = false;
  body = '';
  private request: http.ClientRequest | null = null;
  private buffer = '';
  private waiters: (() => void)[] = [];

  static open(url: string, headers: Record<string, string> = {}): Promise<SseClient> {
    const client = new SseClient();
    return new Promise((resolve, reject) => {
      client.request = http.get(url, { headers: { accept: 'text/event-stream', ...headers } }, (res) => {
        client.status = res.statusCode ?? 0;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => client.feed(chunk));
        res.on('end', () => {
          client.ended = true;
          client.notify();
        });
        res.on('close', () => {
          client.ended = true;
          client.notify();
        });
        if (client.status !== 200) {
          res.on('end', () => resolve(client));
          return;
        }
        resolve(client);
      });
      client.request.on('error', (error) => {
        client.ended = true;
        client.notify();
        if (client.status === 0) reject(error);
      });
    });
  }

  /** Data frames (`event: message`) parsed as JSON. */
  messages(): { id: string | undefined; data: any }[] {
    return this.frames
      .filter((f) => f.data !== undefined)
      .map((f) => ({ id: f.id, data: JSON.parse(f.data!) }));
  }

  async waitFor(predicate: (client: SseClient) => boolean, timeoutMs = 3000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this)) {
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(`timed out waiting; ${this.frames.length} frames so far, ended: ${this.ended}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.request?.destroy();
  }

  private feed(chunk: string): void {
    if (this.status !== 200) {
      this.body += chunk;
      return;
    }
    this.buffer += chunk;
    let index = this.buffer.indexOf('\n\n');
    while (index >= 0) {
      const block = this.buffer.slice(0, index);
      this.buffer = this.buffer.slice(index + 2);
      const frame: SseFrame = {};
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) frame.comment = line.slice(1).trim();
        else {
          const colon = line.indexOf(':');
          const field = line.slice(0, colon);
          const value = line.slice(colon + 1).replace(/^ /, '');
          if (field === 'event' || field === 'id' || field === 'data') frame[field] = value;
        }
      }
      this.frames.push(frame);
      index = this.buffer.indexOf('\n\n');
    }
    this.notify();
  }

  private notify(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}
