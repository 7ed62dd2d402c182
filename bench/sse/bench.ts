// SSE fan-out: how late one event reaches each of 2,000 admin streams, and what the streams cost in memory.
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { HEAP_FLAGS } from '../../apps/gateway/src/node-flags.js';
import { onCleanup, rssMiB, runBench, startNode, TS_NODE_FLAGS } from '../lib/children.js';
import { dockerFreeGatewayEnv } from '../lib/gateway-env.js';
import { freePort, login } from '../lib/net.js';
import { fixed, printTable } from '../lib/report.js';
import type { Connected, Delivered, SubscribersSpec } from './subscribers.js';

const SUBSCRIBERS = 2000;
const TARGET_P99_MS = 100;
const ADMIN_PASSWORD = 'bench-admin-password';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

await runBench('sse bench', 5 * 60_000, async () => {
  console.log(`SSE bench: ${availableParallelism()} CPUs, Node ${process.version}; all traffic on 127.0.0.1`);
  const dataDir = mkdtempSync(path.join(tmpdir(), 'ccp-bench-sse-'));
  onCleanup(async () => rmSync(dataDir, { recursive: true, force: true }));
  const port = await freePort();
  // The fan-out itself never touches the database, so SQLite is enough here.
  const server = startNode(
    'gateway (sse bench-server)',
    [...HEAP_FLAGS, ...TS_NODE_FLAGS, path.join(import.meta.dirname, 'bench-server.ts')],
    {
      cwd: dataDir,
      env: dockerFreeGatewayEnv({
        dataDir,
        databaseUrl: `sqlite:${path.join(dataDir, 'gateway.db')}`,
        port,
        adminPassword: ADMIN_PASSWORD,
      }),
    },
  );
  await server.waitForLine((l) => l === 'ready', 30_000);
  const baseUrl = `http://127.0.0.1:${port}`;
  const token = await login(baseUrl, 'admin', ADMIN_PASSWORD);
  const rssIdle = rssMiB(server.pid);

  const spec: SubscribersSpec = {
    url: `${baseUrl}/v1/admin/sse?topics=image-status`,
    token,
    count: SUBSCRIBERS,
    concurrency: 100,
    waitMs: 20_000,
  };
  const subscribers = startNode('subscribers', [
    ...TS_NODE_FLAGS,
    path.join(import.meta.dirname, 'subscribers.ts'),
    JSON.stringify(spec),
  ]);
  const connected = JSON.parse(
    await subscribers.waitForLine((l) => l.includes('"connected"'), 90_000),
  ) as Connected;
  // Let the connection burst settle (sockets, GC) before reading memory and publishing.
  await sleep(2000);
  const rssConnected = rssMiB(server.pid);

  server.send('publish');
  const published = JSON.parse(await server.waitForLine((l) => l.includes('"fanoutMs"'), 10_000)) as {
    clients: number;
    fanoutMs: number;
    flushMs: number;
  };
  const delivered = JSON.parse(
    await subscribers.waitForLine((l) => l.includes('"received"'), spec.waitMs + 10_000),
  ) as Delivered;
  const rssAfter = rssMiB(server.pid);
  await subscribers.stop();
  await server.stop();

  console.log(
    `\n${SUBSCRIBERS} subscribers on /v1/admin/sse?topics=image-status from one process ` +
      `(opened ${spec.concurrency} at a time in ${fixed(connected.seconds, 1)} s; ${connected.failed} failed)`,
  );
  printTable(
    [
      'streams open',
      'hub clients',
      'received',
      'closed early',
      'min ms',
      'p50 ms',
      'p95 ms',
      'p99 ms',
      'max ms',
      'hub loop ms',
      'loop+flush ms',
    ],
    [
      [
        String(connected.connected),
        String(published.clients),
        String(delivered.received),
        String(delivered.closed),
        fixed(delivered.min, 2),
        fixed(delivered.p50, 2),
        fixed(delivered.p95, 2),
        fixed(delivered.p99, 2),
        fixed(delivered.max, 2),
        fixed(published.fanoutMs, 2),
        fixed(published.flushMs, 2),
      ],
    ],
  );
  console.log('\nGateway RSS');
  printTable(
    ['idle MiB', `${SUBSCRIBERS} streams MiB`, 'after the event MiB', 'per stream KiB'],
    [
      [
        fixed(rssIdle),
        fixed(rssConnected),
        fixed(rssAfter),
        rssIdle === null || rssConnected === null
          ? '-'
          : fixed(((rssConnected - rssIdle) * 1024) / SUBSCRIBERS),
      ],
    ],
  );
  const met = delivered.p99 <= TARGET_P99_MS && delivered.received === SUBSCRIBERS;
  console.log(
    `\nTarget: all ${SUBSCRIBERS} receive the event, p99 <= ${TARGET_P99_MS} ms -> ` +
      `${delivered.received}/${SUBSCRIBERS}, p99 ${fixed(delivered.p99, 2)} ms -> ${met ? 'met' : 'NOT met'}`,
  );
});
