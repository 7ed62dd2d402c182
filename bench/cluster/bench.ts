// Three gateway nodes on one PostgreSQL database and the one Docker engine (issue 19): the API latency of a few
// read endpoints at each replica (one loaded at a time, then all three at once), and SSH throughput to one
// workspace through the node that holds it beside a node that does not. Prints figures; asserts nothing.
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { generateEd25519 } from '../../apps/gateway/dist/domain/users/ssh-public-key.js';
import { HOST_LABEL } from '../../apps/gateway/dist/runtime/container-specs.js';
import { GATEWAY_NODE_FLAGS } from '../../apps/gateway/src/node-flags.js';
import { labEgressEnv } from '../../apps/gateway/test/helpers/lab-egress.js';
import { ensureLab } from '../../test/lab/lab.js';
import type { LoadResult, LoadSpec } from '../api/load.js';
import { adminApi } from '../lib/bench-gateway.js';
import { type Child, onCleanup, runBench, startNode, TS_NODE_FLAGS } from '../lib/children.js';
import { builtImages } from '../lib/images.js';
import { freePort, login, waitForHttp, waitForPort } from '../lib/net.js';
import { createBenchDatabase } from '../lib/postgres.js';
import { fixed, printTable } from '../lib/report.js';
import { openMaster } from '../ssh/openssh.js';
import { removeLabelled } from '../start/containers.js';

const bounded = (name: string, fallback: number, min: number, max: number) =>
  Math.min(max, Math.max(min, Math.floor(Number(process.env[name] ?? fallback)) || fallback));

const ROOT = path.resolve(import.meta.dirname, '../..');
const GATEWAY_MAIN = path.join(ROOT, 'apps/gateway/dist/main.js');
const NODES = ['n1', 'n2', 'n3'] as const;
const USERS = 100;
const RATE = bounded('BENCH_CLUSTER_RATE', 500, 10, 5000);
const SECONDS = bounded('BENCH_CLUSTER_SECONDS', 10, 3, 120);
const SSH_MIB = bounded('BENCH_CLUSTER_SSH_MIB', 256, 16, 4096);
const SSH_RUNS = bounded('BENCH_CLUSTER_SSH_RUNS', 3, 1, 10);
const CONNECTIONS = 10;
const ADMIN_PASSWORD = 'bench-admin-password';
const ENDPOINTS = ['/v1/admin/hosts', '/v1/admin/nodes', '/v1/admin/users', '/v1/admin/events?limit=50'];

const docker = new Docker({ socketPath: process.env.DOCKER_SOCKET ?? '/var/run/docker.sock' });
const sortedMedian = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

interface Node {
  name: string;
  child: Child;
  baseUrl: string;
  sshPort: number;
}

async function runLoad(url: string, token: string, durationS: number, rate?: number): Promise<LoadResult> {
  const spec: LoadSpec = {
    url,
    method: 'GET',
    headers: { authorization: `Bearer ${token}` },
    connections: CONNECTIONS,
    durationS,
    ...(rate === undefined ? {} : { rate }),
  };
  const loader = startNode('autocannon', [
    ...TS_NODE_FLAGS,
    path.join(import.meta.dirname, '../api/load.ts'),
    JSON.stringify(spec),
  ]);
  const line = await loader.waitForLine((l) => l.startsWith('{'), (durationS + 30) * 1000);
  await loader.stop();
  return JSON.parse(line) as LoadResult;
}

const loadCells = (result: LoadResult) => [
  fixed(result.reqPerSec, 0),
  fixed(result.p50, 2),
  fixed(result.p99, 2),
  fixed(result.max, 1),
  String(result.errors + result.non2xx),
];

await runBench('cluster bench', 20 * 60_000, async () => {
  const images = await builtImages(docker, 'test');
  const lab = await ensureLab();
  const databaseUrl = await createBenchDatabase();
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-bench-cluster-'));
  onCleanup(async () => rmSync(work, { recursive: true, force: true }));
  console.log(
    `Cluster bench: ${availableParallelism()} CPUs, Node ${process.version}; three gateway processes ` +
      `(apps/gateway/dist) on one PostgreSQL database and one Docker engine; images ${images.workspace}`,
  );

  // ------------------------------------------------------------------ three nodes
  const key = `${randomBytes(32).toString('base64')}\n`;
  const shared = {
    PATH: process.env.PATH,
    DATABASE_URL: databaseUrl,
    ADMIN_USERNAME: 'admin',
    ADMIN_PASSWORD,
    ADMIN_JWT_SECRET: randomBytes(32).toString('hex'),
    LOG_LEVEL: 'warn',
    DOCKER_SOCKET: process.env.DOCKER_SOCKET ?? '/var/run/docker.sock',
    WORKSPACE_IMAGE_VARIANT: 'test',
    EGRESS_HEALTH_SECONDS: '0',
    ENTRY_PORT: '0',
    HTTP_HOST: '127.0.0.1',
    ...labEgressEnv(lab),
  };
  const nodes: Node[] = [];
  const startOne = async (name: string) => {
    const dataDir = path.join(work, name);
    mkdirSync(dataDir, { mode: 0o700 });
    // The key every node of one installation shares (an operator copies it before starting the others).
    writeFileSync(path.join(dataDir, 'secrets.key'), key, { mode: 0o600 });
    const [httpPort, sshPort, internalPort] = [await freePort(), await freePort(), await freePort()];
    const child = startNode(`gateway ${name}`, [...GATEWAY_NODE_FLAGS, GATEWAY_MAIN], {
      cwd: dataDir,
      env: {
        ...shared,
        DATA_DIR: dataDir,
        NODE_NAME: name,
        HTTP_PORT: String(httpPort),
        SSH_PROXY_PORT: String(sshPort),
        INTERNAL_BIND: `127.0.0.1:${internalPort}`,
      },
    });
    const baseUrl = `http://127.0.0.1:${httpPort}`;
    await Promise.race([
      waitForHttp(`${baseUrl}/healthz`, 60_000),
      child.exited.then((code) => {
        throw new Error(`gateway ${name} exited (${code}): ${child.stderrTail()}`);
      }),
    ]);
    await waitForPort('127.0.0.1', sshPort, 30_000);
    nodes.push({ name, child, baseUrl, sshPort });
  };
  // The first alone: it makes the schema and the admin account.
  await startOne(NODES[0]);
  for (const name of NODES.slice(1)) await startOne(name);
  nodes.sort((a, b) => a.name.localeCompare(b.name));
  const [n1, n2] = nodes as [Node, Node, Node];
  const token = await login(n1.baseUrl, 'admin', ADMIN_PASSWORD);
  /** A request that must succeed: the bench's set-up, not what it measures. */
  const api = async (node: Node, method: string, route: string, body?: unknown): Promise<any> => {
    const answer = await adminApi(node.baseUrl, token)(method, route, body);
    if (answer.status >= 300)
      throw new Error(`${method} ${route} at ${node.name}: ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer.body;
  };

  // ------------------------------------------------------------------ data: users, one running host on n1
  for (let i = 0; i < USERS; i += 4)
    await Promise.all(
      [0, 1, 2, 3].map((j) =>
        api(nodes[(i + j) % 3]!, 'POST', '/v1/admin/users', {
          username: `bench-user-${String(i + j).padStart(3, '0')}`,
          password: 'bench-user-password',
        }),
      ),
    );
  const user = await api(n1, 'POST', '/v1/admin/users', { username: 'bench', password: 'bench-password' });
  const pair = generateEd25519('cluster bench');
  await api(n1, 'POST', `/v1/admin/users/${user.id}/ssh-keys`, {
    public_key: pair.publicKey,
    label: 'bench',
  });
  const keyFile = path.join(work, 'user_key');
  writeFileSync(keyFile, pair.privateKey, { mode: 0o600 });
  const exit = lab.exits[0]!;
  const egress = await api(n1, 'POST', '/v1/admin/egress-ips', {
    label: 'lab vmess-tcp',
    ip_address: exit.address,
    proxy_config: exit.variants['vmess-tcp'].proxyConfig,
  });
  const host = await api(n1, 'POST', '/v1/admin/hosts', {
    user_id: user.id,
    egress_ip_id: egress.id,
    node: 'n1',
  });
  onCleanup(async () => {
    await removeLabelled(docker, HOST_LABEL, host.id);
  }, 60_000);
  onCleanup(async () => {
    await api(n1, 'DELETE', `/v1/admin/hosts/${host.id}`).catch(() => {});
  }, 60_000);
  const started = await api(n1, 'POST', `/v1/admin/hosts/${host.id}/start`);
  for (const until = Date.now() + 240_000; ; ) {
    const task = await api(n1, 'GET', `/v1/admin/tasks/${started.task_id}`);
    if (task.status === 'succeeded') break;
    if (task.status === 'failed') throw new Error(`the host start failed: ${JSON.stringify(task.error)}`);
    if (Date.now() > until) throw new Error('the host start took more than 240 s');
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  console.log(
    `${USERS + 2} users; host ${host.short_id} running on n1; ${(await api(n2, 'GET', '/v1/admin/nodes')).nodes.length} nodes up`,
  );

  // ------------------------------------------------------------------ 1. API latency per replica
  console.log(
    `\nAPI latency, GET at ${RATE} req/s for ${SECONDS} s over ${CONNECTIONS} connections (autocannon in its ` +
      'own process); each replica alone, then all three loaded at once (a load generator each)',
  );
  for (const node of nodes) await runLoad(`${node.baseUrl}/v1/admin/hosts`, token, 3); // warm-up
  const rows: string[][] = [];
  for (const endpoint of ENDPOINTS) {
    for (const node of nodes) {
      const result = await runLoad(`${node.baseUrl}${endpoint}`, token, SECONDS, RATE);
      rows.push([endpoint, node.name, 'alone', ...loadCells(result)]);
    }
    const together = await Promise.all(
      nodes.map((node) => runLoad(`${node.baseUrl}${endpoint}`, token, SECONDS, RATE)),
    );
    together.forEach((result, i) => {
      rows.push([endpoint, nodes[i]!.name, 'all three', ...loadCells(result)]);
    });
  }
  printTable(['endpoint', 'replica', 'loaded', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'errors'], rows);

  // ------------------------------------------------------------------ 2. SSH through the owning node and another
  const target = (node: Node) => ({
    label: node.name,
    host: '127.0.0.1',
    port: node.sshPort,
    user: String(host.ssh_user),
    keyFile,
    cipher: process.env.BENCH_SSH_CIPHER || null,
  });
  const owning = await openMaster(target(n1), work);
  const other = await openMaster(target(n2), work);
  for (const master of [owning, other]) {
    await master.upload(32 * 2 ** 20);
    await master.download(32 * 2 ** 20);
  }
  const rates = {
    upload: { owning: [] as number[], other: [] as number[] },
    download: { owning: [] as number[], other: [] as number[] },
  };
  console.log(
    `\nSSH transfers of ${SSH_MIB} MiB to host ${host.short_id} (on n1), ${SSH_RUNS} runs each: through n1's ` +
      "proxy, and through n2's, which relays through n1's internal channel (TLS-PSK on loopback)",
  );
  for (let run = 1; run <= SSH_RUNS; run++) {
    for (const direction of ['upload', 'download'] as const) {
      for (const [label, master] of [
        ['owning', owning],
        ['other', other],
      ] as const) {
        const ms = await master[direction](SSH_MIB * 2 ** 20);
        rates[direction][label].push(SSH_MIB / (ms / 1000));
      }
    }
  }
  await owning.stop();
  await other.stop();
  printTable(
    ['direction', 'through n1 (owns it) MiB/s', 'through n2 MiB/s', 'n2 / n1'],
    (['upload', 'download'] as const).map((direction) => {
      const own = sortedMedian(rates[direction].owning);
      const via = sortedMedian(rates[direction].other);
      return [direction, fixed(own), fixed(via), `${fixed((100 * via) / own, 0)} %`];
    }),
  );
  console.log(`ciphers: client -> n1 ${owning.cipher}; client -> n2 ${other.cipher}`);
});
