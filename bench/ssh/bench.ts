// The SSH proxy beside direct ssh to the same workspace: bulk throughput both ways (OpenSSH client), the latency
// an exec round trip gains (ssh2 client), and what N concurrent interactive sessions cost the gateway process.
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { performance } from 'node:perf_hooks';
import Docker from 'dockerode';
import { setUpBenchHost } from '../lib/bench-gateway.js';
import { onCleanup, rssMiB, runBench } from '../lib/children.js';
import { fixed, percentile, printTable } from '../lib/report.js';
import { containerMemory } from '../start/containers.js';
import { openMaster, type SshTarget } from './openssh.js';
import { measureMachine, measureUsage, type Usage } from './process-usage.js';
import { connect, execTrue, type Login, openShell, type Shell } from './ssh2-client.js';

const bounded = (name: string, fallback: number, min: number, max: number) =>
  Math.min(max, Math.max(min, Math.floor(Number(process.env[name] ?? fallback)) || fallback));

const TRANSFER_MIB = bounded('BENCH_SSH_MIB', 1024, 16, 4096);
const TRANSFER_RUNS = bounded('BENCH_SSH_TRANSFER_RUNS', 3, 1, 10);
const EXECS = bounded('BENCH_SSH_EXECS', 300, 10, 2000);
const SESSIONS = bounded('BENCH_SSH_SESSIONS', 500, 1, 1000);
/** The OpenSSH client's cipher on both paths (e.g. aes128-gcm@openssh.com); unset, its default order. */
const CIPHER = process.env.BENCH_SSH_CIPHER || null;
/** Extra node flags for the gateway process, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`. */
const NODE_FLAGS = (process.env.BENCH_SSH_NODE_FLAGS ?? '').split(/\s+/).filter(Boolean);
/** The workspace's sshd allows 10 unauthenticated connections at a time (MaxStartups); the proxy's logins
 * to it count as such until they are through. */
const OPEN_CONCURRENCY = 8;
const EXEC_WARMUP = 10;
const IDLE_MS = 10_000;
const ECHO_MS = 10_000;
/** Each session types one key every this many milliseconds while it echoes (a fast typist). */
const KEY_INTERVAL_MS = 200;
const SETTLE_MS = 5000;
const TARGETS = { throughputRatio: 0.8, addedP50Ms: 1 };
/** Room for every session: each holds two sshd processes and a shell in the workspace. */
const LIMITS = {
  memoryMb: Math.max(2048, 512 + 10 * SESSIONS),
  pids: Math.max(1024, 256 + 4 * SESSIONS),
  // All its sessions are one user's: past the default of 100 they would be refused.
  sshSessionsPerUser: Math.max(100, SESSIONS + 10),
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const sortedOf = (values: number[]) => [...values].sort((a, b) => a - b);
const median = (values: number[]) => percentile(sortedOf(values), 50);
const verdict = (met: boolean) => (met ? 'met' : 'NOT met');
/** The 1-minute load average: on a shared machine, other work moves every figure here. */
const loadAverage = () => readFileSync('/proc/loadavg', 'utf8').split(' ')[0];

const docker = new Docker({ socketPath: process.env.DOCKER_SOCKET ?? '/var/run/docker.sock' });

/** Runs `task` over `items`, `limit` at a time; failures are collected, not thrown. */
async function pool<T, R>(
  items: T[],
  limit: number,
  task: (item: T) => Promise<R>,
): Promise<{ results: R[]; errors: unknown[] }> {
  const results: R[] = [];
  const errors: unknown[] = [];
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++]!;
      await task(item).then(
        (result) => results.push(result),
        (error: unknown) => errors.push(error),
      );
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return { results, errors };
}

const usageCells = (usage: Usage) => [
  fixed(usage.cpuPercent),
  fixed(usage.rssStartMiB),
  fixed(usage.rssPeakMiB),
  fixed(usage.rssEndMiB),
];

await runBench('ssh bench', 30 * 60_000, async () => {
  console.log(
    `SSH bench: ${availableParallelism()} CPUs, Node ${process.version}; Docker ` +
      `${(await docker.version()).Version}; the gateway process (apps/gateway/dist, SQLite) and one ` +
      `workspace (test image) in the network lab; load average ${loadAverage()}`,
  );
  const { gateway, host, workDir, deleteHost } = await setUpBenchHost('ssh', docker, {
    limits: LIMITS,
    nodeFlags: NODE_FLAGS,
  });
  const gatewayPid = gateway.child.pid;
  console.log(
    `Host ${host.id} running; login ${host.proxyLogin} at the proxy, ${host.direct.linuxUser}@` +
      `${host.direct.host}:${host.direct.port} directly (the relay in its egress gateway). Workspace limits ` +
      `for ${SESSIONS} sessions: WORKSPACE_MEMORY_MB=${LIMITS.memoryMb}, WORKSPACE_PIDS=${LIMITS.pids}, ` +
      `SSH_MAX_SESSIONS_PER_USER=${LIMITS.sshSessionsPerUser} ` +
      '(defaults 2048 and 1024; raised with the session count); WORKSPACE_CPUS stays 1.',
  );
  const proxyLogin: Login = {
    host: '127.0.0.1',
    port: gateway.sshPort,
    username: host.proxyLogin,
    privateKey: host.userKey,
  };
  const directLogin: Login = {
    host: host.direct.host,
    port: host.direct.port,
    username: host.direct.linuxUser,
    privateKey: host.direct.privateKey,
  };

  // ------------------------------------------------------------------ 1. bulk transfers (OpenSSH)
  const targets: SshTarget[] = [
    {
      label: 'direct',
      host: directLogin.host,
      port: directLogin.port,
      user: directLogin.username,
      keyFile: host.direct.privateKeyFile,
      cipher: CIPHER,
    },
    {
      label: 'proxy',
      host: proxyLogin.host,
      port: proxyLogin.port,
      user: proxyLogin.username,
      keyFile: host.userKeyFile,
      cipher: CIPHER,
    },
  ];
  const [direct, proxy] = [await openMaster(targets[0]!, workDir), await openMaster(targets[1]!, workDir)];
  const bytes = TRANSFER_MIB * 2 ** 20;
  const rates = {
    upload: { direct: [] as number[], proxy: [] as number[] },
    download: { direct: [] as number[], proxy: [] as number[] },
  };
  const gatewayCpu = { upload: [] as number[], download: [] as number[] };
  const machineBusy = {
    upload: { direct: [] as number[], proxy: [] as number[] },
    download: { direct: [] as number[], proxy: [] as number[] },
  };
  // Untimed: the first transfer of each kind pays for page faults and the sessions' first processes.
  for (const master of [direct, proxy]) {
    await master.upload(64 * 2 ** 20);
    await master.download(64 * 2 ** 20);
  }
  console.log(`\nTransfers of ${TRANSFER_MIB} MiB, ${TRANSFER_RUNS} runs of each`);
  for (let run = 1; run <= TRANSFER_RUNS; run++) {
    for (const direction of ['upload', 'download'] as const) {
      // Alternating the paths, so drift on the machine hits both.
      for (const master of [direct, proxy]) {
        const label = master.target.label as 'direct' | 'proxy';
        const usage = measureUsage(gatewayPid);
        const machine = measureMachine();
        const ms = await master[direction](bytes);
        const used = usage.stop();
        const all = machine.stop();
        const rate = TRANSFER_MIB / (ms / 1000);
        rates[direction][label].push(rate);
        machineBusy[direction][label].push(all.busyPercent);
        if (label === 'proxy') gatewayCpu[direction].push(used.cpuPercent);
        console.log(
          `  run ${run} ${direction} ${label}: ${fixed(rate)} MiB/s (gateway CPU ${fixed(used.cpuPercent, 0)} %; ` +
            `machine ${fixed(all.busyPercent, 0)} % busy, ${fixed(all.stealPercent, 1)} % stolen)`,
        );
      }
    }
  }
  await direct.stop();
  await proxy.stop();
  // The gateway's workspace client is ssh2 with its default algorithms, as is this one.
  const probe = await connect(directLogin);
  probe.client.end();
  console.log(
    `\nThroughput (median MiB/s). Ciphers: ssh -> workspace ${direct.cipher}; ssh -> proxy ${proxy.cipher}; ` +
      `proxy (ssh2 ${probe.cipher}) -> workspace`,
  );
  const transferRows = (['upload', 'download'] as const).map((direction) => {
    const d = median(rates[direction].direct);
    const p = median(rates[direction].proxy);
    return [
      direction === 'upload' ? 'upload (cat > /dev/null)' : 'download (head -c … /dev/zero)',
      fixed(d),
      fixed(p),
      `${fixed((100 * p) / d, 0)} %`,
      fixed(median(gatewayCpu[direction]), 0),
      fixed(median(machineBusy[direction].direct), 0),
      fixed(median(machineBusy[direction].proxy), 0),
    ];
  });
  printTable(
    [
      'direction',
      'direct MiB/s',
      'proxy MiB/s',
      'proxy/direct',
      'gateway CPU %',
      `machine busy % (${availableParallelism()} CPUs) direct`,
      'proxy',
    ],
    transferRows,
  );
  // The machine's speed drifts between runs: each proxy transfer against the direct one made just before it.
  const perRun = (direction: 'upload' | 'download') =>
    rates[direction].proxy
      .map((proxyRate, i) => `${fixed((100 * proxyRate) / (rates[direction].direct[i] ?? Number.NaN), 0)} %`)
      .join(', ');
  console.log(`proxy/direct per run: upload ${perRun('upload')}; download ${perRun('download')}`);
  console.log(`load average ${loadAverage()}`);

  // ------------------------------------------------------------------ 2. exec round trips (ssh2)
  const paths = { direct: await connect(directLogin), proxy: await connect(proxyLogin) };
  for (let i = 0; i < EXEC_WARMUP; i++) {
    await execTrue(paths.direct.client);
    await execTrue(paths.proxy.client);
  }
  const execMs = { direct: [] as number[], proxy: [] as number[] };
  for (let i = 0; i < EXECS; i++) {
    execMs.direct.push(await execTrue(paths.direct.client));
    execMs.proxy.push(await execTrue(paths.proxy.client));
  }
  paths.direct.client.end();
  paths.proxy.client.end();
  const quantiles = (values: number[]) => {
    const sorted = sortedOf(values);
    return [50, 90, 99].map((p) => percentile(sorted, p));
  };
  const [d50, d90, d99] = quantiles(execMs.direct) as [number, number, number];
  const [p50, p90, p99] = quantiles(execMs.proxy) as [number, number, number];
  console.log(
    `\nExec of \`true\` over one established connection, ${EXECS} sequential channels per path ` +
      '(request until the channel closed)',
  );
  printTable(
    ['path', 'p50 ms', 'p90 ms', 'p99 ms'],
    [
      ['direct', fixed(d50, 2), fixed(d90, 2), fixed(d99, 2)],
      ['proxy', fixed(p50, 2), fixed(p90, 2), fixed(p99, 2)],
      ['added by the proxy', fixed(p50 - d50, 2), fixed(p90 - d90, 2), fixed(p99 - d99, 2)],
    ],
  );

  // ------------------------------------------------------------------ 3. concurrent interactive sessions
  await sleep(SETTLE_MS);
  const rssBefore = rssMiB(gatewayPid);
  console.log(`\nOpening ${SESSIONS} interactive sessions through the proxy, ${OPEN_CONCURRENCY} at a time`);
  const openUsage = measureUsage(gatewayPid);
  const openBegan = performance.now();
  let opened = 0;
  const { results: shells, errors: openErrors } = await pool(
    Array.from({ length: SESSIONS }, (_, i) => i),
    OPEN_CONCURRENCY,
    async () => {
      const shell = await openShell(proxyLogin);
      if (++opened % 100 === 0) console.log(`  ${opened} open`);
      return shell;
    },
  );
  const openWallMs = performance.now() - openBegan;
  const openCost = openUsage.stop();
  onCleanup(async () => {
    for (const shell of shells) shell.close();
  });
  const openTimes = sortedOf(shells.map((s) => s.openMs));

  await sleep(SETTLE_MS);
  const idleUsage = measureUsage(gatewayPid);
  await sleep(IDLE_MS);
  const idle = idleUsage.stop();
  const workspace = await docker.getContainer(`ccp-ws-${host.id}`).inspect();
  const workspaceMemory = await containerMemory(workspace.State.Pid);

  const echoUsage = measureUsage(gatewayPid);
  const echoes: number[] = [];
  const echoErrors: unknown[] = [];
  const echoUntil = performance.now() + ECHO_MS;
  await Promise.all(
    shells.map(async (shell: Shell) => {
      // Spread over the interval, so keystrokes arrive evenly rather than in bursts of N.
      await sleep(Math.random() * KEY_INTERVAL_MS);
      while (performance.now() < echoUntil) {
        const began = performance.now();
        try {
          echoes.push(await shell.keystroke('x'));
        } catch (error) {
          echoErrors.push(error);
          return;
        }
        await sleep(Math.max(0, KEY_INTERVAL_MS - (performance.now() - began)));
      }
    }),
  );
  const echo = echoUsage.stop();
  for (const shell of shells) shell.close();
  await sleep(SETTLE_MS);
  const rssAfter = rssMiB(gatewayPid);

  const echoSorted = sortedOf(echoes);
  console.log(
    `\n${shells.length} of ${SESSIONS} sessions open (${openErrors.length} failed${
      openErrors[0]
        ? `, first: ${openErrors[0] instanceof Error ? openErrors[0].message : String(openErrors[0])}`
        : ''
    }) in ${fixed(openWallMs / 1000)} s; per session, connect until the prompt: p50 ` +
      `${fixed(percentile(openTimes, 50), 0)} ms, p99 ${fixed(percentile(openTimes, 99), 0)} ms, max ` +
      `${fixed(openTimes.at(-1) ?? Number.NaN, 0)} ms`,
  );
  console.log(
    `Workspace holding them: ${fixed(workspaceMemory.usedMiB)} MiB used (cgroup), ` +
      `${fixed(workspaceMemory.rssMiB)} MiB RSS of its processes added up`,
  );
  console.log(
    `Gateway process (PID ${gatewayPid}): RSS ${fixed(rssBefore)} MiB before the sessions, ` +
      `${fixed(rssAfter)} MiB ${SETTLE_MS / 1000} s after they closed`,
  );
  printTable(
    ['gateway process', 'CPU %', 'RSS start MiB', 'RSS peak MiB', 'RSS end MiB'],
    [
      [`opening ${SESSIONS} sessions`, ...usageCells(openCost)],
      [`holding them idle, ${IDLE_MS / 1000} s`, ...usageCells(idle)],
      [`all echoing a key every ${KEY_INTERVAL_MS} ms, ${ECHO_MS / 1000} s`, ...usageCells(echo)],
    ],
  );
  console.log(
    `Keystroke echo: ${echoes.length} echoed (${fixed(echoes.length / (echo.seconds || 1), 0)}/s), ` +
      `${echoErrors.length} sessions failed; latency p50 ${fixed(percentile(echoSorted, 50), 2)} ms, p99 ` +
      `${fixed(percentile(echoSorted, 99), 2)} ms, max ${fixed(echoSorted.at(-1) ?? Number.NaN, 2)} ms`,
  );

  // ------------------------------------------------------------------ verdicts, clean-up
  const ratios = (['upload', 'download'] as const).map(
    (direction) => median(rates[direction].proxy) / median(rates[direction].direct),
  );
  console.log(
    `\nTargets: throughput >= ${TARGETS.throughputRatio * 100} % of direct -> upload ` +
      `${fixed(ratios[0]! * 100, 0)} %, download ${fixed(ratios[1]! * 100, 0)} % -> ` +
      `${verdict(ratios.every((r) => r >= TARGETS.throughputRatio))}`,
  );
  console.log(
    `         exec p50 added <= ${TARGETS.addedP50Ms} ms -> ${fixed(p50 - d50, 2)} ms -> ` +
      `${verdict(p50 - d50 <= TARGETS.addedP50Ms)}`,
  );
  console.log(
    `         ${SESSIONS} concurrent sessions -> ${shells.length} open, ${echoErrors.length} failed echoing -> ` +
      `${verdict(shells.length === SESSIONS && echoErrors.length === 0)}`,
  );
  await deleteHost();
  // After a clean stop: a profile asked for with --cpu-prof is written as the gateway exits.
  await gateway.child.stop();
});
