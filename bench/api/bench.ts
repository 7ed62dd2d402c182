// API throughput and latency of the built gateway (SQLite and PostgreSQL) beside a bare Fastify app.
// Every server and every load generator is its own process; see bench/README.md.
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import path from 'node:path';
import { GATEWAY_NODE_FLAGS } from '../../apps/gateway/src/node-flags.js';
import { onCleanup, rssMiB, runBench, sampleRss, startNode, TS_NODE_FLAGS } from '../lib/children.js';
import { dockerFreeGatewayEnv } from '../lib/gateway-env.js';
import { freePort, login, postJson, waitForHttp } from '../lib/net.js';
import { createBenchDatabase } from '../lib/postgres.js';
import { fixed, printTable } from '../lib/report.js';
import type { LoadResult, LoadSpec } from './load.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const GATEWAY_MAIN = path.join(ROOT, 'apps/gateway/dist/main.js');
const CONNECTIONS = 10;
const USERS = 100;
const ADMIN_PASSWORD = 'bench-admin-password';
const USER_PASSWORD = 'bench-user-password';
const TARGET = { rate: 2000, p99Ms: 10 };
const DATABASES = (process.env.BENCH_DATABASES ?? 'sqlite,postgres')
  .split(',')
  .map((d) => d.trim())
  .filter((d): d is 'sqlite' | 'postgres' => d === 'sqlite' || d === 'postgres');

interface Scenario {
  title: string;
  method: 'GET' | 'POST';
  path: string;
  authenticated: boolean;
  body?: string;
  durationS: number;
  rate?: number;
}

const SCENARIOS: Scenario[] = [
  {
    title: `GET /v1/admin/users (${USERS + 1} users) at ${TARGET.rate} req/s for 15 s`,
    method: 'GET',
    path: '/v1/admin/users',
    authenticated: true,
    durationS: 15,
    rate: TARGET.rate,
  },
  {
    title: 'GET /v1/admin/users unthrottled for 10 s',
    method: 'GET',
    path: '/v1/admin/users',
    authenticated: true,
    durationS: 10,
  },
  {
    title: 'POST /v1/auth/login (correct password) unthrottled for 10 s',
    method: 'POST',
    path: '/v1/auth/login',
    authenticated: false,
    body: JSON.stringify({ username: 'bench-user-001', password: USER_PASSWORD }),
    durationS: 10,
  },
];

interface Target {
  name: string;
  pid: number;
  baseUrl: string;
  /** Sent to the hello-world app as well, so both see byte-identical requests. */
  token: string;
}

interface Measurement {
  load: LoadResult;
  rssBefore: number | null;
  rssPeak: number | null;
  rssAfter: number | null;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function runLoad(
  target: Target,
  scenario: Scenario,
  durationS = scenario.durationS,
): Promise<LoadResult> {
  const spec: LoadSpec = {
    url: `${target.baseUrl}${scenario.path}`,
    method: scenario.method,
    headers: {
      ...(scenario.authenticated ? { authorization: `Bearer ${target.token}` } : {}),
      ...(scenario.body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(scenario.body === undefined ? {} : { body: scenario.body }),
    connections: CONNECTIONS,
    durationS,
    ...(scenario.rate === undefined ? {} : { rate: scenario.rate }),
  };
  const loader = startNode('autocannon', [
    ...TS_NODE_FLAGS,
    path.join(import.meta.dirname, 'load.ts'),
    JSON.stringify(spec),
  ]);
  const line = await loader.waitForLine((l) => l.startsWith('{'), (durationS + 30) * 1000);
  await loader.stop();
  return JSON.parse(line) as LoadResult;
}

async function measure(target: Target, scenario: Scenario): Promise<Measurement> {
  const rssBefore = rssMiB(target.pid);
  const sampler = sampleRss(target.pid);
  const load = await runLoad(target, scenario);
  const rssPeak = sampler.stop();
  // "After" is read once the server had a second to settle, to show whether memory is given back.
  await sleep(1000);
  return { load, rssBefore, rssPeak, rssAfter: rssMiB(target.pid) };
}

/** Short unthrottled load first, so JIT warm-up does not land in the first measured scenario. */
async function measureAll(target: Target): Promise<Measurement[]> {
  await runLoad(target, SCENARIOS[1]!, 3);
  const results: Measurement[] = [];
  for (const scenario of SCENARIOS) results.push(await measure(target, scenario));
  return results;
}

async function createUsers(baseUrl: string, token: string): Promise<void> {
  let next = 0;
  // A few at a time: each creation hashes a password with scrypt on the libuv pool.
  const worker = async () => {
    while (next < USERS) {
      next += 1;
      const username = `bench-user-${String(next).padStart(3, '0')}`;
      const created = await postJson(
        `${baseUrl}/v1/admin/users`,
        { username, password: USER_PASSWORD },
        token,
      );
      if (created.status !== 201) throw new Error(`create ${username}: HTTP ${created.status}`);
    }
  };
  await Promise.all(Array.from({ length: 4 }, worker));
  const listed = await fetch(`${baseUrl}/v1/admin/users`, { headers: { authorization: `Bearer ${token}` } });
  const { users } = (await listed.json()) as { users: unknown[] };
  if (users.length !== USERS + 1)
    throw new Error(`expected ${USERS + 1} users, the list has ${users.length}`);
}

async function benchGateway(kind: 'sqlite' | 'postgres'): Promise<{ token: string; results: Measurement[] }> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'ccp-bench-'));
  onCleanup(async () => rmSync(dataDir, { recursive: true, force: true }));
  const databaseUrl =
    kind === 'postgres' ? await createBenchDatabase() : `sqlite:${path.join(dataDir, 'gateway.db')}`;
  const port = await freePort();
  // A clean environment and a cwd without .env, so nothing from the caller's shell changes the setup.
  const gateway = startNode(`gateway (${kind})`, [...GATEWAY_NODE_FLAGS, GATEWAY_MAIN], {
    cwd: dataDir,
    env: dockerFreeGatewayEnv({ dataDir, databaseUrl, port, adminPassword: ADMIN_PASSWORD }),
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  await Promise.race([
    waitForHttp(`${baseUrl}/healthz`, 30_000),
    gateway.exited.then((code) => {
      throw new Error(`the gateway exited (code ${code}):\n${gateway.stderrTail()}`);
    }),
  ]);
  const token = await login(baseUrl, 'admin', ADMIN_PASSWORD);
  await createUsers(baseUrl, token);
  const results = await measureAll({ name: gateway.name, pid: gateway.pid, baseUrl, token });
  await gateway.stop();
  const warnings = gateway.stderrTail();
  if (warnings) console.error(`${gateway.name} wrote to stderr:\n${warnings}`);
  return { token, results };
}

async function benchHello(token: string): Promise<{ version: string; results: Measurement[] }> {
  const port = await freePort();
  const hello = startNode(
    'fastify hello-world',
    [...TS_NODE_FLAGS, path.join(import.meta.dirname, 'hello-server.ts')],
    {
      env: { PATH: process.env.PATH, HTTP_PORT: String(port) },
    },
  );
  const ready = await hello.waitForLine((l) => l.startsWith('ready'), 30_000);
  const results = await measureAll({
    name: hello.name,
    pid: hello.pid,
    baseUrl: `http://127.0.0.1:${port}`,
    token,
  });
  await hello.stop();
  return { version: ready.split(' ')[2] ?? '?', results };
}

function ratio(value: number, base: number): string {
  return base > 0 && Number.isFinite(value / base) ? `${(value / base).toFixed(2)}x` : '-';
}

function report(gateways: Map<string, Measurement[]>, hello: Measurement[]): void {
  SCENARIOS.forEach((scenario, i) => {
    const base = hello[i]!.load;
    console.log(`\n${scenario.title}, ${CONNECTIONS} connections`);
    const rows = [...gateways.entries()].map(([name, results]) => ({ name, m: results[i]! }));
    rows.push({ name: 'fastify hello-world', m: hello[i]! });
    printTable(
      [
        'server',
        'req/s',
        'p50 ms',
        'p99 ms',
        'max ms',
        'errors',
        'non-2xx',
        'req/s vs hello',
        'p99 vs hello',
        'RSS MiB before/peak/after',
      ],
      rows.map(({ name, m }) => [
        name,
        fixed(m.load.reqPerSec, 0),
        fixed(m.load.p50, 2),
        fixed(m.load.p99, 2),
        fixed(m.load.max, 1),
        String(m.load.errors),
        String(m.load.non2xx),
        ratio(m.load.reqPerSec, base.reqPerSec),
        ratio(m.load.p99, base.p99),
        `${fixed(m.rssBefore)} / ${fixed(m.rssPeak)} / ${fixed(m.rssAfter)}`,
      ]),
    );
  });
  console.log(`\nTarget: p99 <= ${TARGET.p99Ms} ms at ${TARGET.rate} req/s for GET /v1/admin/users`);
  for (const [name, results] of gateways) {
    const { p99, reqPerSec, errors, non2xx } = results[0]!.load;
    const met = p99 <= TARGET.p99Ms && reqPerSec >= TARGET.rate * 0.95 && errors + non2xx === 0;
    console.log(
      `  ${name}: p99 ${fixed(p99, 2)} ms at ${fixed(reqPerSec, 0)} req/s -> ${met ? 'met' : 'NOT met'}`,
    );
  }
}

await runBench('api bench', 10 * 60_000, async () => {
  const gatewayRequire = createRequire(path.join(ROOT, 'apps/gateway/package.json'));
  const fastifyVersion = (gatewayRequire('fastify/package.json') as { version: string }).version;
  const autocannonVersion = (gatewayRequire('autocannon/package.json') as { version: string }).version;
  console.log(
    `API bench: ${availableParallelism()} CPUs (${cpus()[0]?.model.trim() ?? '?'}), Node ${process.version}, ` +
      `gateway Fastify ${fastifyVersion}, autocannon ${autocannonVersion}; all traffic on 127.0.0.1`,
  );
  const gateways = new Map<string, Measurement[]>();
  let token = '';
  for (const kind of DATABASES) {
    console.log(`measuring the gateway on ${kind} ...`);
    const measured = await benchGateway(kind);
    gateways.set(`gateway ${kind}`, measured.results);
    token = measured.token;
  }
  console.log('measuring the Fastify hello-world ...');
  const hello = await benchHello(token);
  if (hello.version !== fastifyVersion) console.log(`warning: hello-world runs Fastify ${hello.version}`);
  report(gateways, hello.results);
});
