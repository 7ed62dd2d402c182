// Holds the SSE streams of the fan-out bench, spread over the replicas, in a process of its own. After
// `expect <n>` on stdin it waits until every stream has read n task ticks (or time runs out) and reports, per
// replica, how late they arrived and when the last one did.
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { percentile } from '../lib/report.js';

export interface StreamsSpec {
  /** One admin stream URL per replica; stream i goes to replica i modulo their number. */
  urls: string[];
  token: string;
  count: number;
  /** How long to wait for a run's messages. */
  waitMs: number;
}

export interface Opened {
  connected: number;
  failed: number;
}

export interface ReplicaDelivery {
  streams: number;
  received: number;
  /** Messages that arrived twice or out of order (by SSE id) on a stream. */
  misordered: number;
  p50: number;
  p99: number;
  max: number;
  /** Wall-clock time the last message arrived on any of this replica's streams. */
  lastAt: number;
}

interface Stream {
  replica: number;
  socket: Socket;
  open: boolean;
  received: number;
  lastId: number;
  /** Unparsed text: a frame may be split over reads. */
  pending: string;
}

const spec = JSON.parse(process.argv[2] ?? '') as StreamsSpec;
const wallClock = () => performance.timeOrigin + performance.now();
const FRAME = /id: (\d+)\ndata: [^\n]*"stage":"sent_at=([\d.]+)"/g;
const streams: Stream[] = [];
let latencies: number[][] = spec.urls.map(() => []);
let misordered: number[] = spec.urls.map(() => 0);
let lastAt: number[] = spec.urls.map(() => 0);
let expected = 0;
let finish: () => void = () => {};

/** Opens one stream on a raw socket, so the reader's own cost per message stays small. */
function open(replica: number): Promise<boolean> {
  const target = new URL(spec.urls[replica]!);
  return new Promise((resolve) => {
    const socket = connect({ host: target.hostname, port: Number(target.port) });
    const stream: Stream = { replica, socket, open: false, received: 0, lastId: 0, pending: '' };
    socket.setEncoding('utf8');
    socket.setTimeout(10_000, () => socket.destroy());
    socket.on('connect', () =>
      socket.write(
        `GET ${target.pathname}${target.search} HTTP/1.1\r\nHost: ${target.host}\r\n` +
          `Authorization: Bearer ${spec.token}\r\nAccept: text/event-stream\r\n\r\n`,
      ),
    );
    socket.on('data', (chunk: string) => {
      const at = wallClock();
      stream.pending += chunk;
      if (!stream.open) {
        if (!stream.pending.includes('\r\n\r\n')) return;
        if (!stream.pending.startsWith('HTTP/1.1 200')) return socket.destroy();
        stream.open = true;
        socket.setTimeout(0);
        streams.push(stream);
        resolve(true);
      }
      read(stream, at);
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      if (!stream.open) resolve(false);
    });
  });
}

function read(stream: Stream, at: number): void {
  FRAME.lastIndex = 0;
  let consumed = 0;
  for (let match = FRAME.exec(stream.pending); match; match = FRAME.exec(stream.pending)) {
    const id = Number(match[1]);
    if (id <= stream.lastId) misordered[stream.replica]!++;
    stream.lastId = id;
    latencies[stream.replica]!.push(at - Number(match[2]));
    lastAt[stream.replica] = at;
    stream.received++;
    consumed = FRAME.lastIndex;
  }
  // Keep only what may start an unfinished frame (chunked encoding's size lines are skipped by the pattern).
  stream.pending = stream.pending.slice(Math.max(consumed, stream.pending.length - 64 * 1024));
  if (stream.received === expected && streams.every((s) => s.received >= expected)) finish();
}

let connected = 0;
let failed = 0;
let next = 0;
await Promise.all(
  Array.from({ length: Math.min(100, spec.count) }, async () => {
    while (next < spec.count) {
      const replica = next++ % spec.urls.length;
      if (await open(replica)) connected++;
      else failed++;
    }
  }),
);
process.stdout.write(`${JSON.stringify({ connected, failed } satisfies Opened)}\n`);

createInterface({ input: process.stdin }).on('line', async (line) => {
  const [command, count] = line.trim().split(' ');
  if (command !== 'expect') return;
  latencies = spec.urls.map(() => []);
  misordered = spec.urls.map(() => 0);
  lastAt = spec.urls.map(() => 0);
  for (const stream of streams) stream.received = 0;
  expected = Number(count);
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, spec.waitMs);
    finish = () => {
      clearTimeout(timer);
      resolve();
    };
  });
  const report = spec.urls.map((_, replica): ReplicaDelivery => {
    const sorted = Float64Array.from(latencies[replica]!).sort();
    return {
      streams: streams.filter((s) => s.replica === replica).length,
      received: sorted.length,
      misordered: misordered[replica]!,
      p50: percentile(sorted, 50),
      p99: percentile(sorted, 99),
      max: sorted.length > 0 ? sorted[sorted.length - 1]! : Number.NaN,
      lastAt: lastAt[replica]!,
    };
  });
  process.stdout.write(`${JSON.stringify(report)}\n`);
});

process.once('SIGTERM', () => {
  for (const stream of streams) stream.socket.destroy();
  process.exit(0);
});
