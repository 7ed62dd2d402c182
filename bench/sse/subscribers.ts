// Opens many SSE streams from one process (a separate one from the gateway), reports when they are all
// open, then waits for the one `image-status` event and reports how late it arrived on each stream.
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { percentile } from '../lib/report.js';

export interface SubscribersSpec {
  url: string;
  token: string;
  count: number;
  /** Streams being opened at once; each one is an authenticated request the gateway must answer. */
  concurrency: number;
  /** How long to wait for the event after all streams are open. */
  waitMs: number;
}

export interface Connected {
  connected: number;
  failed: number;
  seconds: number;
}

export interface Delivered {
  received: number;
  /** Streams that ended before the event arrived. */
  closed: number;
  min: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

const spec = JSON.parse(process.argv[2] ?? '') as SubscribersSpec;
const target = new URL(spec.url);
const requestText =
  `GET ${target.pathname}${target.search} HTTP/1.1\r\nHost: ${target.host}\r\n` +
  `Authorization: Bearer ${spec.token}\r\nAccept: text/event-stream\r\n\r\n`;
const wallClock = () => performance.timeOrigin + performance.now();
const sockets: Socket[] = [];
const latencies: number[] = [];
let connected = 0;
let failed = 0;
let closed = 0;
let finish: () => void = () => {};

/** Opens one stream on a raw socket: reading bytes directly keeps the subscriber's own cost per message,
 * which lands in the measured latency, far below that of a full HTTP client. */
function subscribe(): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect({ host: target.hostname, port: Number(target.port) });
    sockets.push(socket);
    socket.setEncoding('utf8');
    let state: 'opening' | 'open' | 'received' = 'opening';
    let tail = '';
    const opened = (ok: boolean) => {
      if (ok) connected++;
      else failed++;
      resolve();
    };
    socket.on('connect', () => socket.write(requestText));
    // Bounds the opening phase: a stream that gets no answer counts as failed instead of stalling the run.
    socket.setTimeout(10_000, () => {
      if (state === 'opening') socket.destroy();
    });
    socket.on('data', (chunk: string) => {
      const at = wallClock();
      if (state === 'received') return;
      // A frame may be split over reads; keep a bounded tail so a match can complete.
      tail = (tail + chunk).slice(-4096);
      if (state === 'opening') {
        if (!tail.includes('\r\n\r\n')) return;
        if (!tail.startsWith('HTTP/1.1 200')) {
          socket.destroy();
          return;
        }
        state = 'open';
        socket.setTimeout(0);
        opened(true);
      }
      const match = /"sent_at":([\d.]+)/.exec(tail);
      if (!match) return;
      state = 'received';
      latencies.push(at - Number(match[1]));
      if (latencies.length + closed >= connected) finish();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      if (state === 'opening') opened(false);
      else if (state === 'open') {
        closed++;
        if (latencies.length + closed >= connected) finish();
      }
    });
  });
}

const started = performance.now();
let next = 0;
await Promise.all(
  Array.from({ length: spec.concurrency }, async () => {
    while (next < spec.count) {
      next++;
      await subscribe();
    }
  }),
);
const report: Connected = { connected, failed, seconds: (performance.now() - started) / 1000 };
process.stdout.write(`${JSON.stringify(report)}\n`);

await new Promise<void>((resolve) => {
  const timer = setTimeout(resolve, spec.waitMs);
  finish = () => {
    clearTimeout(timer);
    resolve();
  };
});
const sorted = Float64Array.from(latencies).sort();
const delivered: Delivered = {
  received: latencies.length,
  closed,
  min: sorted.length > 0 ? sorted[0]! : Number.NaN,
  p50: percentile(sorted, 50),
  p95: percentile(sorted, 95),
  p99: percentile(sorted, 99),
  max: sorted.length > 0 ? sorted[sorted.length - 1]! : Number.NaN,
};
process.stdout.write(`${JSON.stringify(delivered)}\n`);
for (const socket of sockets) socket.destroy();
process.exit(0);
