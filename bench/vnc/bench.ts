// The desktop's WebSocket through the gateway's proxy beside a direct connection to the same websockify (the
// relay in the egress gateway, the proxy's own upstream), in the same run: full-screen raw updates (throughput)
// and 1-pixel update round trips (added latency). Then the memory of the idle desktop and the time a restart
// takes through the API.
import { execFile } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { setUpBenchHost } from '../lib/bench-gateway.js';
import { rssMiB, runBench } from '../lib/children.js';
import { login } from '../lib/net.js';
import { fixed, percentile, printTable } from '../lib/report.js';
import { containerMemory } from '../start/containers.js';
import { openRfb, type RfbSession } from './rfb-client.js';

const bounded = (name: string, fallback: number, min: number, max: number) =>
  Math.min(max, Math.max(min, Math.floor(Number(process.env[name] ?? fallback)) || fallback));

const FRAMES = bounded('BENCH_VNC_FRAMES', 100, 10, 1000);
const ROUND_TRIPS = bounded('BENCH_VNC_ROUND_TRIPS', 500, 50, 5000);
const RESTARTS = bounded('BENCH_VNC_RESTARTS', 5, 1, 20);
const ROUNDS = 2;
const WARMUP = 10;
const IDLE_SETTLE_MS = 5000;

const exec = promisify(execFile);
const docker = new Docker({ socketPath: process.env.DOCKER_SOCKET ?? '/var/run/docker.sock' });
const sorted = (values: number[]) => [...values].sort((a, b) => a - b);

async function throughput(session: RfbSession): Promise<{ mibPerSecond: number; frameMs: number }> {
  for (let i = 0; i < WARMUP; i++) await session.update(0, 0, session.width, session.height);
  let bytes = 0;
  const began = performance.now();
  for (let i = 0; i < FRAMES; i++) bytes += await session.update(0, 0, session.width, session.height);
  const seconds = (performance.now() - began) / 1000;
  return { mibPerSecond: bytes / 2 ** 20 / seconds, frameMs: (seconds * 1000) / FRAMES };
}

async function roundTrips(session: RfbSession): Promise<number[]> {
  for (let i = 0; i < WARMUP; i++) await session.update(0, 0, 1, 1);
  const times: number[] = [];
  for (let i = 0; i < ROUND_TRIPS; i++) {
    const began = performance.now();
    await session.update(0, 0, 1, 1);
    times.push(performance.now() - began);
  }
  return sorted(times);
}

await runBench('vnc bench', 20 * 60_000, async () => {
  console.log(
    `VNC bench: ${availableParallelism()} CPUs, Node ${process.version}; the gateway process ` +
      '(apps/gateway/dist, SQLite) and one workspace (test image, desktop 1280x800x24) in the network lab',
  );
  const { gateway, host } = await setUpBenchHost('vnc', docker, {
    limits: { memoryMb: 2048, pids: 1024 },
    nodeFlags: [],
  });
  // The host's owner, with a password of our own: the user portal's desktop path.
  const users = (await gateway.api('GET', '/v1/admin/users')).body.users as {
    id: string;
    username: string;
  }[];
  const owner = users.find((user) => user.username === 'bench')!;
  const rotated = await gateway.api('POST', `/v1/admin/users/${owner.id}/rotate-password`);
  const token = await login(gateway.baseUrl, 'bench', String(rotated.body.new_password));
  // The desktop starts beside sshd, and may still be coming up when the host's task is done.
  for (let waited = 0; ; waited += 200) {
    const status = await gateway.api('GET', `/v1/admin/hosts/${host.id}/vnc/status`);
    if (status.body.status === 'running') break;
    if (waited > 30_000) throw new Error(`the desktop is ${JSON.stringify(status.body)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }

  const proxied = `${gateway.baseUrl.replace('http', 'ws')}/v1/user/hosts/${host.id}/vnc/websockify`;
  const direct = `ws://${host.direct.host}:6080/websockify`;
  console.log(`Proxy: ${proxied}\nDirect: ${direct} (the relay in the egress gateway)\n`);
  const paths: { name: string; url: string; headers: Record<string, string>; password?: string }[] = [
    { name: 'direct', url: direct, headers: {}, password: host.desktopPassword },
    { name: 'proxy', url: proxied, headers: { authorization: `Bearer ${token}` } },
  ];

  // Two rounds, alternating, so neither path gets only the cold or only the warm turn.
  const rows: string[][] = [];
  const results = new Map<string, { mib: number[]; p50: number[] }>();
  for (let round = 1; round <= ROUNDS; round++) {
    for (const { name, url, headers, password } of paths) {
      const session = await openRfb(url, headers, password);
      const gatewayRssBefore = rssMiB(gateway.child.pid!) ?? Number.NaN;
      const bulk = await throughput(session);
      const times = await roundTrips(session);
      session.close();
      const result = results.get(name) ?? { mib: [], p50: [] };
      result.mib.push(bulk.mibPerSecond);
      result.p50.push(percentile(times, 50));
      results.set(name, result);
      rows.push([
        `${name} (${round})`,
        fixed(bulk.mibPerSecond),
        fixed(bulk.frameMs, 2),
        fixed(percentile(times, 50), 3),
        fixed(percentile(times, 99), 3),
        fixed(times.at(-1)!, 3),
        fixed(gatewayRssBefore),
        fixed(rssMiB(gateway.child.pid!) ?? Number.NaN),
      ]);
    }
  }
  console.log(
    `Full-screen raw updates (${FRAMES} × ${((1280 * 800 * 4) / 2 ** 20).toFixed(1)} MiB) and ` +
      `${ROUND_TRIPS} 1-pixel update round trips, one connection per path and round:`,
  );
  printTable(
    ['path (round)', 'MiB/s', 'ms/frame', 'rtt p50 ms', 'rtt p99 ms', 'rtt max ms', 'gw RSS MiB', 'after'],
    rows,
  );
  const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
  const viaProxy = results.get('proxy')!;
  const viaDirect = results.get('direct')!;
  console.log(
    `\nProxy/direct throughput (mean of the rounds): ${fixed(mean(viaProxy.mib) / mean(viaDirect.mib), 2)}x; ` +
      `added round-trip latency (p50, mean of the rounds): ${fixed(mean(viaProxy.p50) - mean(viaDirect.p50), 3)} ms\n`,
  );

  // The idle desktop: no client, a few seconds after the last one left.
  await new Promise((resolve) => setTimeout(resolve, IDLE_SETTLE_MS));
  const container = docker.getContainer(`ccp-ws-${host.id}`);
  const memory = await containerMemory((await container.inspect()).State.Pid);
  const { stdout } = await exec('docker', [
    'exec',
    `ccp-ws-${host.id}`,
    'ps',
    '-eo',
    'rss=,comm=',
    '--sort=-rss',
  ]);
  console.log('Idle workspace with its desktop (cgroup, as docker stats; and per process RSS):');
  printTable(
    ['what', 'MiB'],
    [
      ['container, used (docker stats)', fixed(memory.usedMiB)],
      ['container, RSS summed', fixed(memory.rssMiB)],
      ...stdout
        .trim()
        .split('\n')
        .map((line) => line.trim().split(/\s+/))
        .filter(([kib]) => Number(kib) > 1024)
        .map(([kib, comm]) => [`  ${comm}`, fixed(Number(kib) / 1024)]),
    ],
  );

  const restarts: number[] = [];
  for (let i = 0; i < RESTARTS; i++) {
    const began = performance.now();
    const restarted = await gateway.api('POST', `/v1/admin/hosts/${host.id}/vnc/restart`);
    if (restarted.status !== 200)
      throw new Error(`restart: HTTP ${restarted.status} ${JSON.stringify(restarted.body)}`);
    restarts.push(performance.now() - began);
  }
  const restartTimes = sorted(restarts);
  console.log(
    `\nPOST …/vnc/restart until the desktop answers through the relay (${RESTARTS} runs): ` +
      `median ${fixed(percentile(restartTimes, 50), 0)} ms, max ${fixed(restartTimes.at(-1)!, 0)} ms`,
  );
});
