// SSE fan-out across gateways: three gateways on one PostgreSQL database, admin streams spread over them, task
// progress ticks made on the first; how late each replica's streams get them, and how many a second they carry.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { HEAP_FLAGS } from '../../apps/gateway/src/node-flags.js';
import { type Child, onCleanup, runBench, startNode, TS_NODE_FLAGS } from '../lib/children.js';
import { dockerFreeGatewayEnv } from '../lib/gateway-env.js';
import { freePort, login } from '../lib/net.js';
import { createBenchDatabase } from '../lib/postgres.js';
import { fixed, printTable } from '../lib/report.js';
import type { Opened, ReplicaDelivery, StreamsSpec } from './streams.js';

const bounded = (name: string, fallback: number, min: number, max: number) =>
  Math.min(max, Math.max(min, Math.floor(Number(process.env[name] ?? fallback)) || fallback));

const REPLICAS = 3;
const STREAMS = bounded('BENCH_SSE_FANOUT_STREAMS', 300, REPLICAS, 3000);
const RATE = bounded('BENCH_SSE_FANOUT_RATE', 100, 1, 5000);
const PACED_SECONDS = 10;
const BURST = bounded('BENCH_SSE_FANOUT_BURST', 2000, 10, 10_000);
const ADMIN_PASSWORD = 'bench-admin-password';

await runBench('sse-fanout bench', 5 * 60_000, async () => {
  console.log(
    `SSE fan-out bench: ${availableParallelism()} CPUs, Node ${process.version}; ${REPLICAS} gateways, ` +
      'PostgreSQL and the streams on this machine, all traffic on 127.0.0.1',
  );
  const databaseUrl = await createBenchDatabase();
  const secret = randomBytes(36).toString('base64');
  const replicas: { child: Child; url: string }[] = [];
  // One after the other: the first runs the migrations the others then find done.
  for (let i = 0; i < REPLICAS; i++) {
    const dataDir = mkdtempSync(path.join(tmpdir(), `ccp-bench-sse-fanout-${i}-`));
    onCleanup(async () => rmSync(dataDir, { recursive: true, force: true }));
    const port = await freePort();
    const child = startNode(
      `gateway ${i}`,
      [...HEAP_FLAGS, ...TS_NODE_FLAGS, path.join(import.meta.dirname, 'replica.ts')],
      {
        cwd: dataDir,
        env: dockerFreeGatewayEnv({
          dataDir,
          databaseUrl,
          port,
          adminPassword: ADMIN_PASSWORD,
          jwtSecret: secret,
          extra: { NODE_NAME: `replica-${i}` },
        }),
      },
    );
    await child.waitForLine((l) => l === 'ready', 60_000);
    replicas.push({ child, url: `http://127.0.0.1:${port}` });
  }
  const origin = replicas[0]!.child;
  const token = await login(replicas[0]!.url, 'admin', ADMIN_PASSWORD);

  const spec: StreamsSpec = {
    urls: replicas.map((r) => `${r.url}/v1/admin/sse?topics=tasks`),
    token,
    count: STREAMS,
    waitMs: 60_000,
  };
  const streams = startNode('streams', [
    ...TS_NODE_FLAGS,
    path.join(import.meta.dirname, 'streams.ts'),
    JSON.stringify(spec),
  ]);
  const opened = JSON.parse(await streams.waitForLine((l) => l.includes('"connected"'), 90_000)) as Opened;
  console.log(
    `\n${opened.connected} admin streams open (${opened.failed} failed), spread evenly over the gateways`,
  );

  /** Publishes on the first gateway and waits until every stream has everything (or time runs out). */
  const run = async (count: number, perSecond: number) => {
    streams.send(`expect ${count}`);
    const startedAt = performance.timeOrigin + performance.now();
    origin.send(`publish ${count} ${perSecond}`);
    const published = JSON.parse(await origin.waitForLine((l) => l.includes('"published"'), 120_000)) as {
      seconds: number;
    };
    const delivered = JSON.parse(
      await streams.waitForLine((l) => l.startsWith('['), spec.waitMs + 10_000),
    ) as ReplicaDelivery[];
    return { startedAt, published, delivered };
  };
  const print = (title: string, count: number, result: Awaited<ReturnType<typeof run>>) => {
    console.log(`\n${title}`);
    printTable(
      [
        'gateway',
        'streams',
        'received',
        'of',
        'misordered',
        'p50 ms',
        'p99 ms',
        'max ms',
        'msg/s per stream',
      ],
      result.delivered.map((replica, i) => [
        i === 0 ? '0 (origin)' : String(i),
        String(replica.streams),
        String(replica.received),
        String(replica.streams * count),
        String(replica.misordered),
        fixed(replica.p50, 2),
        fixed(replica.p99, 2),
        fixed(replica.max, 2),
        fixed(count / ((replica.lastAt - result.startedAt) / 1000), 0),
      ]),
    );
    const total = result.delivered.reduce((sum, replica) => sum + replica.received, 0);
    const lastAt = Math.max(...result.delivered.map((replica) => replica.lastAt));
    console.log(
      `published ${count} in ${fixed(result.published.seconds, 2)} s; ` +
        `${fixed(total / ((lastAt - result.startedAt) / 1000), 0)} messages/s delivered over all streams`,
    );
  };

  // Untimed warm-up: connections of every pool, JIT.
  await run(200, 0);
  const paced = await run(RATE * PACED_SECONDS, RATE);
  print(`Paced: ${RATE} task ticks/s for ${PACED_SECONDS} s on gateway 0`, RATE * PACED_SECONDS, paced);
  const burst = await run(BURST, 0);
  print(`Burst: ${BURST} task ticks at once on gateway 0`, BURST, burst);
  await streams.stop();
  for (const replica of replicas.reverse()) await replica.child.stop();
});
