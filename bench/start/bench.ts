// Host start: from DockerWorkspaceRuntime.start until the workspace's sshd greets through the egress gateway's
// relay, a new host's first start (its workspace made and set up when it was created, as the gateway does),
// one asked at creation, and warm (a stopped pair), and cold with nothing made ahead and no pool, beside `docker run`/`docker start` of the same
// image waiting for the same banner; what an idle host holds in memory; and N idle hosts side by side.
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import Docker from 'dockerode';
import ssh2 from 'ssh2';
import { v2rayEngine } from '../../apps/gateway/dist/egress/v2ray-engine.js';
import { HOST_LABEL } from '../../apps/gateway/dist/runtime/container-specs.js';
import { DockerWorkspaceRuntime } from '../../apps/gateway/dist/runtime/docker-workspace-runtime.js';
import type { TimingSpan } from '../../apps/gateway/dist/runtime/start-timings.js';
import type { UpstreamSpec, WorkspaceSpec } from '../../apps/gateway/dist/runtime/workspace-runtime.js';
import { labEgressSettings } from '../../apps/gateway/test/helpers/lab-egress.js';
import { ensureLab, type VariantName, variant } from '../../test/lab/lab.js';
import { removeDataDir } from '../../test/support/data-dir.js';
import { onCleanup, runBench } from '../lib/children.js';
import { builtImages } from '../lib/images.js';
import { fixed, percentile, printTable } from '../lib/report.js';
import {
  type ContainerMemory,
  containerMemory,
  memAvailableMiB,
  rawRunArgs,
  removeLabelled,
  timedRaw,
  waitForSshBanner,
} from './containers.js';

const bounded = (name: string, fallback: number, max: number) =>
  Math.min(max, Math.max(1, Math.floor(Number(process.env[name] ?? fallback)) || fallback));

const RUNS = bounded('BENCH_START_RUNS', 20, 100);
const DENSITY_HOSTS = bounded('BENCH_DENSITY_HOSTS', 10, 50);
const IMAGE_VARIANT = process.env.BENCH_WORKSPACE_VARIANT === 'full' ? 'full' : 'test';
const UPSTREAM = (process.env.BENCH_START_UPSTREAM ?? 'vmess-tcp') as VariantName;
/** Egress gateways started ahead per upstream (EGRESS_GATEWAY_POOL) of the runtime the targets are read from. */
const POOL = Math.min(4, Math.max(0, Math.floor(Number(process.env.BENCH_START_POOL ?? 1)) || 0));
// Issue 28, goal 1: a start close to a raw `docker run`, with the path checked as fully as before.
const TARGET_P50_MS = 400;
const TARGET_RAW_RATIO = 1.6;
const TARGET_PATH_CHECK_MS = 150;
/** Goal 4: an idle egress gateway's memory as `docker stats` shows it (bench/idle-memory has the detail). */
const TARGET_GATEWAY_MIB = 25;
/** Long enough for sshd, v2ray and the kernel to settle after a start before memory is read. */
const SETTLE_MS = 5000;
/** How long after a host's creation (its workspace made and set up) the bench starts it for the first time. */
const AFTER_CREATION_MS = 1000;
/** A start slower than this has its spans printed. */
const OUTLIER_MS = 1000;
const READY_TIMEOUT_MS = 30_000;
const USER = 'bench';
const LIMITS = { memoryMb: 512, cpus: 1, pids: 256, homeMb: 1024 };

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const sortedOf = (values: number[]) => [...values].sort((a, b) => a - b);
const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

/** Every host id, label value and volume of this run starts with this, so clean-up can find all of it. */
const RUN = `bench-${randomBytes(3).toString('hex')}`;

const docker = new Docker({ socketPath: process.env.DOCKER_SOCKET ?? '/var/run/docker.sock' });

async function memoryOf(name: string): Promise<ContainerMemory> {
  return containerMemory((await docker.getContainer(name).inspect()).State.Pid);
}

/** Each span's timings over the runs of one kind, by its name, in the order the runtime first ended them. */
type SpanSamples = Map<string, { atMs: number[]; ms: number[] }>;

function addSpans(samples: SpanSamples, spans: TimingSpan[]): void {
  for (const { name, atMs, ms } of spans) {
    const entry = samples.get(name) ?? { atMs: [], ms: [] };
    entry.atMs.push(atMs);
    entry.ms.push(ms);
    samples.set(name, entry);
  }
}

const median = (values: number[] | undefined) =>
  values && values.length > 0 ? fixed(percentile(sortedOf(values), 50), 0) : '-';

await runBench('start bench', 30 * 60_000, async () => {
  console.log(
    `Start bench: ${availableParallelism()} CPUs, Node ${process.version}; Docker ` +
      `${(await docker.version()).Version}; everything labelled ${HOST_LABEL}=${RUN}*`,
  );
  const dataDir = mkdtempSync(path.join(tmpdir(), 'ccp-bench-start-'));
  onCleanup(async () => removeDataDir(dataDir));
  // The same starts without a pool, interleaved with the others: the A/B on one loaded machine.
  const unpooledDir = mkdtempSync(path.join(tmpdir(), 'ccp-bench-start-'));
  onCleanup(async () => removeDataDir(unpooledDir));
  // Registered after the data directory, so it runs before it. The second sweep catches a container whose
  // creation was still on its way to the daemon when an interruption began.
  onCleanup(async () => {
    await removeLabelled(docker, HOST_LABEL, RUN);
    await sleep(1000);
    await removeLabelled(docker, HOST_LABEL, RUN);
  }, 60_000);

  const images = await builtImages(docker, IMAGE_VARIANT);
  const lab = await ensureLab();
  // The spans of the last start, from the runtime's debug log.
  let lastSpans: TimingSpan[] = [];
  const runtimeAt = (dir: string, pool: number) =>
    new DockerWorkspaceRuntime({
      docker,
      engine: v2rayEngine,
      images,
      dataDir: dir,
      egress: labEgressSettings(lab),
      egressPool: { perUpstream: pool, max: 8 },
      log: {
        debug: (fields, message) => {
          if (message.startsWith('host start')) lastSpans = (fields as { spans?: TimingSpan[] }).spans ?? [];
        },
      },
    });
  const runtime = runtimeAt(dataDir, POOL);
  const unpooled = runtimeAt(unpooledDir, 0);
  // Registered last, so it runs first: the pooled gateways carry no host label for the sweep below.
  onCleanup(async () => runtime.retireEgressGateways());
  const authorizedKey = ssh2.utils.generateKeyPairSync('ed25519').public;
  const spec = (hostId: string): WorkspaceSpec => ({
    hostId,
    shortId: hostId.slice(-6),
    linuxUser: USER,
    authorizedKey,
    desktopPassword: 'bench-pw',
    limits: LIMITS,
  });
  const chosen = variant(lab, UPSTREAM);
  const upstream: UpstreamSpec = {
    egressIpId: `bench-${UPSTREAM}`,
    label: `${UPSTREAM} via ${chosen.exit.name}`,
    exitIp: chosen.exit.address,
    config: chosen.proxyConfig as UpstreamSpec['config'],
  };

  /** One timed runtime start; its spans go into `samples`, with the wait for the banner after it returned. */
  const timedStart = async (hostId: string, samples: SpanSamples, by = runtime): Promise<number> => {
    const began = performance.now();
    const endpoints = await by.start(spec(hostId), upstream, async () => {});
    const returned = performance.now();
    await waitForSshBanner(endpoints.ssh.host, endpoints.ssh.port, READY_TIMEOUT_MS);
    const ended = performance.now();
    // A run far off the others says where its time went (the tables show medians only).
    if (ended - began > OUTLIER_MS)
      console.error(
        `start of ${hostId} took ${Math.round(ended - began)} ms: ` +
          lastSpans.map((span) => `${span.name} at ${span.atMs} for ${span.ms}`).join('; '),
      );
    addSpans(samples, [
      ...lastSpans,
      { name: 'bench: banner seen after start returned', atMs: returned - began, ms: ended - returned },
    ]);
    return ended - began;
  };

  const timedRawStart = (args: string[], name: string) => timedRaw(docker, args, name, READY_TIMEOUT_MS);

  // ------------------------------------------------------------------ start → SSH banner
  const host = `${RUN}-s`;
  const unpooledHost = `${RUN}-u`;
  const rawHost = `${RUN}-raw`;
  const rawName = `ccp-raw-${RUN}`;
  const rawArgs = () =>
    rawRunArgs({
      name: rawName,
      hostId: rawHost,
      image: images.workspace,
      authorizedKey,
      user: USER,
      limits: LIMITS,
    });
  const times = {
    atCreation: [] as number[],
    cold: [] as number[],
    warm: [] as number[],
    rawCold: [] as number[],
    rawWarm: [] as number[],
    unpooledCold: [] as number[],
    unpooledWarm: [] as number[],
  };
  const coldSpans: SpanSamples = new Map();
  const warmSpans: SpanSamples = new Map();
  const unpooledSpans: SpanSamples = new Map();
  // Untimed: loads the images and the runtime's code paths, so the first timed run is not the odd one out
  // (and, with a pool, fills it for this upstream as a first start does).
  await runtime.start(spec(host), upstream, async () => {});
  await unpooled.start(spec(unpooledHost), upstream, async () => {});
  await timedRawStart(rawArgs(), rawName);
  for (let i = 0; i < RUNS; i++) {
    // Cold: no container and no volume. Interleaved with the raw runs so drift on the machine hits both.
    // Each pooled start begins with the pool refilled after the one before, as starts spread over time find it
    // (one right after another takes none: its gateway is still being made, beside it).
    // A script that creates a host and starts it at once: the start takes over the workspace setting up.
    await runtime.remove(host);
    await runtime.poolSettled();
    const preparing = runtime.prepare(spec(host));
    times.atCreation.push(await timedStart(host, new Map()));
    await preparing;
    // A new host's first start: the gateway makes and sets up its workspace when the host is created
    // (runtime.prepare), and the user's start comes later. One begun the very moment the set-up's stop returned
    // would share the CPUs with Docker's clean-up after that stop (40-60 ms more on machine A).
    await runtime.remove(host);
    await runtime.prepare(spec(host));
    await delay(AFTER_CREATION_MS);
    await runtime.poolSettled();
    times.cold.push(await timedStart(host, coldSpans));
    await runtime.stop(host);
    await runtime.poolSettled();
    times.warm.push(await timedStart(host, warmSpans));

    await removeLabelled(docker, HOST_LABEL, rawHost);
    times.rawCold.push(await timedRawStart(rawArgs(), rawName));
    await docker.getContainer(rawName).stop({ t: 5 });
    times.rawWarm.push(await timedRawStart(['start', rawName], rawName));

    await unpooled.remove(unpooledHost);
    times.unpooledCold.push(await timedStart(unpooledHost, unpooledSpans, unpooled));
    await unpooled.stop(unpooledHost);
    times.unpooledWarm.push(await timedStart(unpooledHost, unpooledSpans, unpooled));
  }
  await unpooled.remove(unpooledHost);

  console.log(
    `\nStart until the SSH banner, ${RUNS} runs each (image ${images.workspace}, upstream ${UPSTREAM})`,
  );
  const row = (label: string, values: number[]) => {
    const sorted = sortedOf(values);
    return [
      label,
      fixed(percentile(sorted, 50), 0),
      fixed(percentile(sorted, 95), 0),
      fixed(sorted[0]!, 0),
      fixed(sorted.at(-1)!, 0),
    ];
  };
  printTable(
    ['start', 'p50 ms', 'p95 ms', 'min ms', 'max ms'],
    [
      row(`runtime first start (workspace set up at creation; pool ${POOL})`, times.cold),
      row(`runtime start asked at creation, set-up taken over (pool ${POOL})`, times.atCreation),
      row(`runtime warm (stopped pair; new egress gateway; pool ${POOL})`, times.warm),
      row('runtime cold: nothing made ahead, no pool (interleaved)', times.unpooledCold),
      row('runtime warm without a pool (interleaved)', times.unpooledWarm),
      row('raw docker run (bridge network)', times.rawCold),
      row('raw docker start (stopped container)', times.rawWarm),
    ],
  );
  console.log(
    '\nWhere a runtime start goes: median of each timing span, when it began (ms after the start began) and ' +
      'how long it took; spans overlap where parts run side by side',
  );
  const startedAt = (name: string) =>
    percentile(
      sortedOf((coldSpans.get(name) ?? warmSpans.get(name) ?? unpooledSpans.get(name))?.atMs ?? [0]),
      50,
    );
  printTable(
    ['span', 'cold at', 'cold ms', 'warm at', 'warm ms', 'no pool at', 'no pool ms'],
    [...new Set([...coldSpans.keys(), ...warmSpans.keys(), ...unpooledSpans.keys()])]
      .sort((a, b) => startedAt(a) - startedAt(b))
      .map((name) => [
        name,
        median(coldSpans.get(name)?.atMs),
        median(coldSpans.get(name)?.ms),
        median(warmSpans.get(name)?.atMs),
        median(warmSpans.get(name)?.ms),
        median(unpooledSpans.get(name)?.atMs),
        median(unpooledSpans.get(name)?.ms),
      ]),
  );

  // ------------------------------------------------------------------ idle memory of one host
  await sleep(SETTLE_MS);
  const idle = {
    workspace: await memoryOf(`ccp-ws-${host}`),
    gateway: await memoryOf(`ccp-egress-${host}`),
    raw: await memoryOf(rawName),
  };
  console.log(
    `\nIdle memory, ${SETTLE_MS / 1000} s after a start: cgroup usage as docker stats shows it, the RSS of ` +
      "the container's processes added up, and its containerd shim's RSS (outside the cgroup)",
  );
  const memoryRow = (label: string, ...parts: ContainerMemory[]) => [
    label,
    fixed(sum(parts.map((m) => m.usedMiB))),
    fixed(sum(parts.map((m) => m.rssMiB))),
    fixed(sum(parts.map((m) => m.shimRssMiB))),
  ];
  printTable(
    ['container', 'used MiB', 'RSS MiB', 'shim RSS MiB'],
    [
      memoryRow('workspace (ccp-ws-*)', idle.workspace),
      memoryRow('egress gateway (ccp-egress-*)', idle.gateway),
      memoryRow('host (both)', idle.workspace, idle.gateway),
      memoryRow('raw docker run workspace', idle.raw),
    ],
  );
  await runtime.remove(host);
  await removeLabelled(docker, HOST_LABEL, rawHost);

  // ------------------------------------------------------------------ density
  await sleep(SETTLE_MS);
  const availableBefore = await memAvailableMiB();
  const densityHosts = Array.from(
    { length: DENSITY_HOSTS },
    (_, i) => `${RUN}-d${String(i + 1).padStart(2, '0')}`,
  );
  const densityStarts: number[] = [];
  for (const hostId of densityHosts) densityStarts.push(await timedStart(hostId, new Map()));
  await sleep(SETTLE_MS);
  const perHost = await Promise.all(
    densityHosts.map(async (hostId) => ({
      workspace: await memoryOf(`ccp-ws-${hostId}`),
      gateway: await memoryOf(`ccp-egress-${hostId}`),
    })),
  );
  const availableAfter = await memAvailableMiB();
  const all = perHost.flatMap((h) => [h.workspace, h.gateway]);
  const total = { used: sum(all.map((m) => m.usedMiB)), rss: sum(all.map((m) => m.rssMiB)) };
  const shims = sum(all.map((m) => m.shimRssMiB));
  const gatewaysRss = sortedOf(perHost.map((h) => h.gateway.rssMiB));
  const startsSorted = sortedOf(densityStarts);
  const drop = availableBefore - availableAfter;
  console.log(
    `\nDensity: ${DENSITY_HOSTS} idle hosts started one after another, read ${SETTLE_MS / 1000} s after the ` +
      "last; the host's MemAvailable drop also counts the shims, dockerd, namespaces and page cache",
  );
  printTable(
    ['', 'total MiB', 'per host MiB'],
    [
      ['containers: used', fixed(total.used), fixed(total.used / DENSITY_HOSTS)],
      ['containers: RSS', fixed(total.rss), fixed(total.rss / DENSITY_HOSTS)],
      ['containerd shims: RSS', fixed(shims), fixed(shims / DENSITY_HOSTS)],
      ['MemAvailable drop', fixed(drop), fixed(drop / DENSITY_HOSTS)],
    ],
  );
  console.log(
    `hosts ${DENSITY_HOSTS}; egress gateway RSS p50 ${fixed(percentile(gatewaysRss, 50))} MiB, max ` +
      `${fixed(gatewaysRss.at(-1)!)} MiB; start p50 ${fixed(percentile(startsSorted, 50), 0)} ms, ` +
      `last (with ${DENSITY_HOSTS - 1} running) ${fixed(densityStarts.at(-1)!, 0)} ms`,
  );
  const removed = await removeLabelled(docker, HOST_LABEL, RUN);

  const cold = percentile(sortedOf(times.cold), 50);
  const warm = percentile(sortedOf(times.warm), 50);
  const rawCold = percentile(sortedOf(times.rawCold), 50);
  const rawWarm = percentile(sortedOf(times.rawWarm), 50);
  const verdict = (met: boolean) => (met ? 'met' : 'NOT met');
  console.log(
    `\nTargets: start p50 <= ${TARGET_P50_MS} ms and <= ${TARGET_RAW_RATIO}x raw -> ` +
      `cold ${fixed(cold, 0)} ms, ${fixed(cold / rawCold, 1)}x docker run -> ` +
      `${verdict(cold <= TARGET_P50_MS && cold <= TARGET_RAW_RATIO * rawCold)}; ` +
      `warm ${fixed(warm, 0)} ms, ${fixed(warm / rawWarm, 1)}x docker start -> ` +
      `${verdict(warm <= TARGET_P50_MS && warm <= TARGET_RAW_RATIO * rawWarm)}`,
  );
  const pathCheck = (samples: SpanSamples) => percentile(sortedOf(samples.get('path check')?.ms ?? [0]), 50);
  const pathChecks = [pathCheck(coldSpans), pathCheck(warmSpans)];
  console.log(
    `         path check p50 <= ${TARGET_PATH_CHECK_MS} ms -> cold ${fixed(pathChecks[0]!, 0)} ms, warm ` +
      `${fixed(pathChecks[1]!, 0)} ms -> ${verdict(Math.max(...pathChecks) <= TARGET_PATH_CHECK_MS)}`,
  );
  const gatewaysUsed = sortedOf(perHost.map((h) => h.gateway.usedMiB));
  const gatewayMax = Math.max(idle.gateway.usedMiB, gatewaysUsed.at(-1)!);
  console.log(
    `         egress gateway idle <= ${TARGET_GATEWAY_MIB} MiB (cgroup, as docker stats) -> ` +
      `${fixed(idle.gateway.usedMiB)} MiB, density max ${fixed(gatewaysUsed.at(-1)!)} MiB -> ` +
      `${verdict(gatewayMax <= TARGET_GATEWAY_MIB)} (its processes' RSS added up: ${fixed(idle.gateway.rssMiB)} MiB)`,
  );
  console.log(`Removed ${removed} containers and volumes labelled ${HOST_LABEL}=${RUN}*`);
});
