// Idle memory of hosts: N hosts started by DockerWorkspaceRuntime and left alone, then every process of each
// egress gateway and workspace read from /proc (RSS, PSS, USS) beside the cgroup's own figures.
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import net from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import ssh2 from 'ssh2';
import { v2rayEngine } from '../../apps/gateway/dist/egress/v2ray-engine.js';
import { HOST_LABEL } from '../../apps/gateway/dist/runtime/container-specs.js';
import { DockerWorkspaceRuntime } from '../../apps/gateway/dist/runtime/docker-workspace-runtime.js';
import type { UpstreamSpec, WorkspaceSpec } from '../../apps/gateway/dist/runtime/workspace-runtime.js';
import { labEgressSettings } from '../../apps/gateway/test/helpers/lab-egress.js';
import { ensureLab, type VariantName, variant } from '../../test/lab/lab.js';
import { removeDataDir } from '../../test/support/data-dir.js';
import { onCleanup, runBench } from '../lib/children.js';
import { builtImages } from '../lib/images.js';
import { fixed, percentile, printTable } from '../lib/report.js';
import { removeLabelled, waitForSshBanner } from '../start/containers.js';
import { type ContainerProcesses, containerProcesses, type ProcessMemory, sumOf } from './process-memory.js';

const bounded = (name: string, fallback: number, max: number) =>
  Math.min(max, Math.max(1, Math.floor(Number(process.env[name] ?? fallback)) || fallback));

const HOSTS = bounded('BENCH_IDLE_HOSTS', 3, 20);
/** Long enough for v2ray's first garbage collections and the kernel to settle after the start. */
const SETTLE_S = bounded('BENCH_IDLE_SETTLE_S', 30, 600);
const IMAGE_VARIANT = process.env.BENCH_WORKSPACE_VARIANT === 'full' ? 'full' : 'test';
const UPSTREAM: VariantName = 'vmess-tcp';
/** Held through the first host's relay to its sshd; below sshd's MaxStartups (10), which drops the rest. */
const CONNECTIONS = bounded('BENCH_IDLE_CONNECTIONS', 8, 9);
/** Issue 28: an idle egress gateway, read as its cgroup's memory without page cache (anon+kernel). */
const TARGET_GATEWAY_MIB = 25;
const READY_TIMEOUT_MS = 30_000;
const USER = 'bench';
const LIMITS = { memoryMb: 512, cpus: 1, pids: 256, homeMb: 1024 };
const RUN = `bench-${randomBytes(3).toString('hex')}`;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const mib = (kib: number) => fixed(kib / 1024);
const median = (values: number[]) =>
  percentile(
    [...values].sort((a, b) => a - b),
    50,
  );

const docker = new Docker({ socketPath: process.env.DOCKER_SOCKET ?? '/var/run/docker.sock' });

async function readContainer(name: string): Promise<ContainerProcesses> {
  return containerProcesses((await docker.getContainer(name).inspect()).State.Pid);
}

/**
 * The same process in every host: its command line, numbered when several share one (the entrypoint's
 * subshells), in PID order.
 */
function keyed(processes: ProcessMemory[]): Map<string, ProcessMemory> {
  const seen = new Map<string, number>();
  const byKey = new Map<string, ProcessMemory>();
  for (const p of processes) {
    const n = (seen.get(p.command) ?? 0) + 1;
    seen.set(p.command, n);
    byKey.set(n === 1 ? p.command : `${p.command} #${n}`, p);
  }
  return byKey;
}

/** Opens `count` connections to `target` and resolves once each has read sshd's banner. */
async function holdConnections(target: { host: string; port: number }, count: number): Promise<net.Socket[]> {
  const sockets: net.Socket[] = [];
  onCleanup(async () => {
    for (const socket of sockets) socket.destroy();
  });
  await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<void>((resolve, reject) => {
          const socket = net.connect(target.port, target.host);
          sockets.push(socket);
          socket.setTimeout(READY_TIMEOUT_MS, () => socket.destroy(new Error('no banner through the relay')));
          socket.once('data', () => {
            socket.setTimeout(0);
            resolve();
          });
          socket.on('error', reject);
        }),
    ),
  );
  return sockets;
}

const shorten = (text: string, max = 72) => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);

/** Per process: the median over the hosts of each figure (the processes are the same in every host). */
function printProcesses(title: string, containers: ContainerProcesses[]): void {
  const keyedAll = containers.map((c) => keyed(c.processes));
  console.log(`\n${title}: per process, median over ${containers.length} hosts (MiB)`);
  const figure = (key: string, field: 'rssKiB' | 'pssKiB' | 'ussKiB' | 'anonKiB') =>
    mib(median(keyedAll.map((k) => k.get(key)?.[field] ?? 0)));
  const rows = [...keyedAll[0]!.keys()].map((key) => [
    shorten(key),
    figure(key, 'rssKiB'),
    figure(key, 'pssKiB'),
    figure(key, 'ussKiB'),
    figure(key, 'anonKiB'),
  ]);
  const total = (field: 'rssKiB' | 'pssKiB' | 'ussKiB' | 'anonKiB') =>
    mib(median(containers.map((c) => sumOf(c.processes, field))));
  rows.push(['all processes', total('rssKiB'), total('pssKiB'), total('ussKiB'), total('anonKiB')]);
  printTable(['process', 'RSS', 'PSS', 'USS', 'anon'], rows);
}

interface Totals {
  processes: number;
  rssKiB: number;
  pssKiB: number;
  ussKiB: number;
  usedKiB: number;
  anonKernelKiB: number;
}

const totalsOf = (c: ContainerProcesses): Totals => ({
  processes: c.processes.length,
  rssKiB: sumOf(c.processes, 'rssKiB'),
  pssKiB: sumOf(c.processes, 'pssKiB'),
  ussKiB: sumOf(c.processes, 'ussKiB'),
  usedKiB: c.cgroup.usedKiB,
  anonKernelKiB: c.cgroup.anonKernelKiB,
});

const added = (a: Totals, b: Totals): Totals => ({
  processes: a.processes + b.processes,
  rssKiB: a.rssKiB + b.rssKiB,
  pssKiB: a.pssKiB + b.pssKiB,
  ussKiB: a.ussKiB + b.ussKiB,
  usedKiB: a.usedKiB + b.usedKiB,
  anonKernelKiB: a.anonKernelKiB + b.anonKernelKiB,
});

function totalsRow(label: string, totals: Totals[]): string[] {
  const m = (field: keyof Totals) => median(totals.map((t) => t[field]));
  const top = Math.max(...totals.map((t) => t.rssKiB));
  return [
    label,
    fixed(m('processes'), 0),
    mib(m('rssKiB')),
    mib(top),
    mib(m('pssKiB')),
    mib(m('ussKiB')),
    mib(m('usedKiB')),
    mib(m('anonKernelKiB')),
  ];
}

await runBench('idle-memory bench', 15 * 60_000, async () => {
  console.log(
    `Idle memory bench: ${availableParallelism()} CPUs, Node ${process.version}; Docker ` +
      `${(await docker.version()).Version}; ${HOSTS} hosts, read ${SETTLE_S} s after the last start; ` +
      `everything labelled ${HOST_LABEL}=${RUN}*`,
  );
  const dataDir = mkdtempSync(path.join(tmpdir(), 'ccp-bench-idle-'));
  onCleanup(async () => removeDataDir(dataDir));
  // The second sweep catches a container whose creation was still on its way when an interruption began.
  onCleanup(async () => {
    await removeLabelled(docker, HOST_LABEL, RUN);
    await sleep(1000);
    await removeLabelled(docker, HOST_LABEL, RUN);
  }, 60_000);

  const images = await builtImages(docker, IMAGE_VARIANT);
  console.log(`images ${images.egressGateway}, ${images.workspace}; upstream ${UPSTREAM}`);
  const lab = await ensureLab();
  const runtime = new DockerWorkspaceRuntime({
    docker,
    engine: v2rayEngine,
    images,
    dataDir,
    egress: labEgressSettings(lab),
  });
  const authorizedKey = ssh2.utils.generateKeyPairSync('ed25519').public;
  const chosen = variant(lab, UPSTREAM);
  const upstream: UpstreamSpec = {
    egressIpId: `bench-${UPSTREAM}`,
    label: `${UPSTREAM} via ${chosen.exit.name}`,
    exitIp: chosen.exit.address,
    config: chosen.proxyConfig as UpstreamSpec['config'],
  };

  let firstSsh: { host: string; port: number } | undefined;
  const hostIds = Array.from({ length: HOSTS }, (_, i) => `${RUN}-i${String(i + 1).padStart(2, '0')}`);
  for (const hostId of hostIds) {
    const spec: WorkspaceSpec = {
      hostId,
      shortId: hostId.slice(-6),
      linuxUser: USER,
      authorizedKey,
      desktopPassword: 'bench-pw',
      limits: LIMITS,
    };
    const endpoints = await runtime.start(spec, upstream, async () => {});
    await waitForSshBanner(endpoints.ssh.host, endpoints.ssh.port, READY_TIMEOUT_MS);
    firstSsh ??= endpoints.ssh;
  }
  await sleep(SETTLE_S * 1000);
  const gateways = await Promise.all(hostIds.map((id) => readContainer(`ccp-egress-${id}`)));
  const workspaces = await Promise.all(hostIds.map((id) => readContainer(`ccp-ws-${id}`)));

  console.log(
    '\nRSS counts every page a process maps, shared ones in full (binaries and libraries count in each ' +
      'process and each host); PSS splits shared pages between the processes that map them, here and in the ' +
      'other hosts; USS is what the process holds alone; anon its anonymous memory.',
  );
  printProcesses('Egress gateway', gateways);
  printProcesses('Workspace', workspaces);

  const gatewayTotals = gateways.map(totalsOf);
  const workspaceTotals = workspaces.map(totalsOf);
  console.log(
    `\nPer idle host, median over ${HOSTS} (MiB; "RSS max" the largest). docker stats: the cgroup's usage ` +
      'without inactive page cache; anon+kernel: without any page cache, what one more such container costs',
  );
  printTable(
    ['container', 'procs', 'RSS', 'RSS max', 'PSS', 'USS', 'docker stats', 'anon+kernel'],
    [
      totalsRow('egress gateway', gatewayTotals),
      totalsRow('workspace', workspaceTotals),
      totalsRow(
        'host (both)',
        gatewayTotals.map((g, i) => added(g, workspaceTotals[i]!)),
      ),
    ],
  );

  // What each connection through the relay adds to an egress gateway: the SSH proxy holds one per session.
  const relayed = await holdConnections(firstSsh!, CONNECTIONS);
  await sleep(2000);
  const busy = totalsOf(await readContainer(`ccp-egress-${hostIds[0]}`));
  for (const socket of relayed) socket.destroy();
  const idle = gatewayTotals[0]!;
  const per = (field: keyof Totals) => fixed((busy[field] - idle[field]) / 1024 / CONNECTIONS, 2);
  console.log(
    `\n${CONNECTIONS} connections held through the first host's relay to its sshd: per connection ` +
      `${fixed((busy.processes - idle.processes) / CONNECTIONS, 1)} processes, RSS +${per('rssKiB')} MiB, ` +
      `PSS +${per('pssKiB')} MiB, USS +${per('ussKiB')} MiB, anon+kernel +${per('anonKernelKiB')} MiB`,
  );
  const worst = Math.max(...gatewayTotals.map((t) => t.anonKernelKiB)) / 1024;
  console.log(
    `\nTarget: egress gateway idle memory (its cgroup's anon+kernel) <= ${TARGET_GATEWAY_MIB} MiB -> max ` +
      `${fixed(worst)} MiB -> ${worst <= TARGET_GATEWAY_MIB ? 'met' : 'NOT met'}; its processes' RSS added up ` +
      `(shared pages counted in each): max ${fixed(Math.max(...gatewayTotals.map((t) => t.rssKiB)) / 1024)} MiB`,
  );
  const removed = await removeLabelled(docker, HOST_LABEL, RUN);
  console.log(`Removed ${removed} containers and volumes labelled ${HOST_LABEL}=${RUN}*`);
});
