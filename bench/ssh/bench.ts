// The SSH proxy beside direct ssh to the same workspace: bulk throughput both ways (OpenSSH client), the latency
// an exec round trip gains (ssh2 client), and what N concurrent interactive sessions cost the gateway process.
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import Docker from 'dockerode';
import { setUpBenchHost } from '../lib/bench-gateway.js';
import { onCleanup, rssMiB, runBench } from '../lib/children.js';
import { fixed, percentile, printTable } from '../lib/report.js';
import { containerMemory } from '../start/containers.js';
import { openMaster, type SshTarget } from './openssh.js';
import { measureMachine, measureUsage, type Usage } from './process-usage.js';
import {
  describeSessions,
  droppedOf,
  type Echoes,
  echoSessions,
  openSessions,
  rssPerSessionKiB,
} from './sessions.js';
import { connect, execTrue, type Login, type Shell } from './ssh2-client.js';

/** One round of keystrokes: how many sessions typed, their echoes, the gateway's cost, how busy the machine was. */
interface EchoRound {
  typing: number;
  result: Echoes;
  gateway: Usage;
  busy: number;
}

const bounded = (name: string, fallback: number, min: number, max: number) =>
  Math.min(max, Math.max(min, Math.floor(Number(process.env[name] ?? fallback)) || fallback));

const TRANSFER_MIB = bounded('BENCH_SSH_MIB', 1024, 16, 4096);
const TRANSFER_RUNS = bounded('BENCH_SSH_TRANSFER_RUNS', 3, 1, 10);
const EXECS = bounded('BENCH_SSH_EXECS', 300, 10, 2000);
const SESSIONS = bounded('BENCH_SSH_SESSIONS', 1000, 1, 2000);
/** Sessions per host: a host may have 100 (SSH_MAX_SESSIONS_PER_HOST, at most 128, what its relay takes at once)
 * and a user 100 (SSH_MAX_SESSIONS_PER_USER); the default keeps within both, and within the workspace's memory. */
const SESSIONS_PER_HOST = bounded('BENCH_SSH_SESSIONS_PER_HOST', 50, 1, 1000);
const HOSTS = Math.ceil(SESSIONS / SESSIONS_PER_HOST);
/** The OpenSSH client's cipher on both paths (e.g. aes128-gcm@openssh.com); unset, its default order. */
const CIPHER = process.env.BENCH_SSH_CIPHER || null;
/** Extra node flags for the gateway process, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`. */
const NODE_FLAGS = (process.env.BENCH_SSH_NODE_FLAGS ?? '').split(/\s+/).filter(Boolean);
/** Sessions being opened at once: 8 per host (the proxy logs in to one workspace 6 at a time, its sshd taking
 * 10 unauthenticated connections), at most 32 in all, half of what one address may have before logging in. */
const OPEN_CONCURRENCY = Math.min(32, 8 * HOSTS);
const EXEC_WARMUP = 10;
const IDLE_MS = 10_000;
const ECHO_MS = 10_000;
/** Each session types one key every this many milliseconds while it echoes (a fast typist). */
const KEY_INTERVAL_MS = 200;
const SETTLE_MS = 5000;
/**
 * After every session has typed at once, rounds in which only these percentages of them type (spread over the
 * hosts, the rest held open and idle): where the machine's knee lies. The target is read on the full round.
 */
const TYPING_SHARES = (process.env.BENCH_SSH_TYPING_SHARES ?? '75,50,25,10')
  .split(',')
  .map((share) => Number(share.trim()))
  .filter((share) => Number.isInteger(share) && share >= 1 && share <= 99);
const TARGETS = { throughputRatio: 0.9, addedP50Ms: 1, echoP99Ms: 50 };
/** Room for each host's sessions: each holds two sshd processes and a shell in the workspace. The defaults
 * (2048 MiB, 1024 PIDs, 100 sessions per user and per host) hold 50 sessions per host. Past 128 a host's
 * sessions are refused (what its relay takes), and the bench counts them. */
const LIMITS = {
  memoryMb: Math.max(2048, 512 + 10 * SESSIONS_PER_HOST),
  pids: Math.max(1024, 256 + 4 * SESSIONS_PER_HOST),
  ...(SESSIONS_PER_HOST > 100
    ? { sshSessionsPerUser: SESSIONS_PER_HOST + 10, sshSessionsPerHost: Math.min(128, SESSIONS_PER_HOST) }
    : {}),
};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const sortedOf = (values: number[]) => [...values].sort((a, b) => a - b);
const median = (values: number[]) => percentile(sortedOf(values), 50);
const verdict = (met: boolean) => (met ? 'met' : 'NOT met');
/** The 1-minute load average: on a shared machine, other work moves every figure here. */
const loadAverage = () => readFileSync('/proc/loadavg', 'utf8').split(' ')[0];

const docker = new Docker({ socketPath: process.env.DOCKER_SOCKET ?? '/var/run/docker.sock' });

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
  const { gateway, host, workDir, addHost, deleteHost } = await setUpBenchHost('ssh', docker, {
    limits: LIMITS,
    nodeFlags: NODE_FLAGS,
  });
  const gatewayPid = gateway.child.pid;
  console.log(
    `Host ${host.id} running; login ${host.proxyLogin} at the proxy, ${host.direct.linuxUser}@` +
      `${host.direct.host}:${host.direct.port} directly (the relay in its egress gateway). ${SESSIONS} sessions ` +
      `over ${HOSTS} hosts of one user each; workspace limits WORKSPACE_MEMORY_MB=${LIMITS.memoryMb}, ` +
      `WORKSPACE_PIDS=${LIMITS.pids}, SSH_MAX_SESSIONS_PER_USER=${LIMITS.sshSessionsPerUser ?? 100}, ` +
      `SSH_MAX_SESSIONS_PER_HOST=${LIMITS.sshSessionsPerHost ?? 100} (defaults 2048, 1024, 100 and 100; raised ` +
      'only past 50 sessions per host); WORKSPACE_CPUS stays 1.',
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
  /** The gateway's CPU seconds per GiB relayed: its cost per byte, which a busy machine moves far less. */
  const gatewayCpuPerGiB = { upload: [] as number[], download: [] as number[] };
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
        if (label === 'proxy') {
          gatewayCpu[direction].push(used.cpuPercent);
          gatewayCpuPerGiB[direction].push(((used.cpuPercent / 100) * used.seconds * 1024) / TRANSFER_MIB);
        }
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
      fixed(median(gatewayCpuPerGiB[direction]), 2),
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
      'gateway CPU s/GiB',
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
  // Spread over hosts of a user each, as many users' sessions through one gateway are: one host may have 100
  // sessions (SSH_MAX_SESSIONS_PER_HOST), one user 100.
  const logins: Login[] = [proxyLogin];
  const hosts = [host];
  for (let i = 2; i <= HOSTS; i++) {
    const more = await addHost(`bench${i}`);
    hosts.push(more);
    logins.push({ ...proxyLogin, username: more.proxyLogin, privateKey: more.userKey });
  }
  if (HOSTS > 1) console.log(`\n${HOSTS} hosts running`);
  await sleep(SETTLE_MS);
  console.log(
    `\nOpening ${SESSIONS} interactive sessions through the proxy, ${SESSIONS_PER_HOST} per host, ` +
      `${OPEN_CONCURRENCY} at a time`,
  );
  const openUsage = measureUsage(gatewayPid);
  const opened = await openSessions({
    logins,
    count: SESSIONS,
    concurrency: OPEN_CONCURRENCY,
    gatewayPid,
    settleMs: 0,
    progress: (open) => console.log(`  ${open} open`),
    progressEvery: 100,
  });
  const openCost = openUsage.stop();
  const { shells } = opened;
  onCleanup(async () => {
    for (const shell of shells) shell.close();
  });

  await sleep(SETTLE_MS);
  opened.rssOpenMiB = rssMiB(gatewayPid);
  const idleUsage = measureUsage(gatewayPid);
  await sleep(IDLE_MS);
  const idle = idleUsage.stop();
  const workspaceMemory = await Promise.all(
    hosts.map(async (h) =>
      containerMemory((await docker.getContainer(`ccp-ws-${h.id}`).inspect()).State.Pid),
    ),
  );
  const droppedIdle = droppedOf(shells);

  /** One round of keystrokes by these sessions, with what it cost the gateway and how busy the machine was. */
  const echoRound = async (typing: Shell[]): Promise<EchoRound> => {
    const usage = measureUsage(gatewayPid);
    const machine = measureMachine();
    const result = await echoSessions(typing, ECHO_MS, KEY_INTERVAL_MS);
    return { typing: typing.length, result, gateway: usage.stop(), busy: machine.stop().busyPercent };
  };
  // The clients (this process) and the workspaces share the machine with the gateway: where the time goes.
  const clientUsage = measureUsage(process.pid);
  const live = shells.filter((shell) => !shell.dropped());
  const full = await echoRound(live);
  const clientCost = clientUsage.stop();
  const { result: echo, gateway: echoCost } = full;
  const typingRounds: EchoRound[] = [];
  for (const share of TYPING_SHARES) {
    const typing = live.filter(
      (shell, i) => !shell.dropped() && Math.floor(((i + 1) * share) / 100) > Math.floor((i * share) / 100),
    );
    typingRounds.push(await echoRound(typing));
  }
  const dropped = droppedOf(shells);
  for (const shell of shells) shell.close();
  await sleep(SETTLE_MS);
  const rssAfter = rssMiB(gatewayPid);

  console.log('');
  for (const line of describeSessions(opened, SESSIONS, dropped)) console.log(line);
  console.log(
    `Workspaces holding them: ${fixed(workspaceMemory.reduce((a, m) => a + m.usedMiB, 0))} MiB used (cgroups), ` +
      `${fixed(workspaceMemory.reduce((a, m) => a + m.rssMiB, 0))} MiB RSS of their processes added up ` +
      `(${HOSTS} hosts); the gateway's RSS ${fixed(rssAfter)} MiB ${SETTLE_MS / 1000} s after they closed`,
  );
  printTable(
    ['gateway process', 'CPU %', 'RSS start MiB', 'RSS peak MiB', 'RSS end MiB'],
    [
      [`opening ${SESSIONS} sessions`, ...usageCells(openCost)],
      [`holding them idle, ${IDLE_MS / 1000} s`, ...usageCells(idle)],
      [`all echoing a key every ${KEY_INTERVAL_MS} ms, ${ECHO_MS / 1000} s`, ...usageCells(echoCost)],
    ],
  );
  console.log(
    `While echoing: the bench process (every session's ssh2 client) used ${fixed(clientCost.cpuPercent, 0)} % of a ` +
      `CPU, the machine was ${fixed(full.busy, 0)} % busy (${availableParallelism()} CPUs), ` +
      `load average ${loadAverage()}`,
  );
  const echoP99 = percentile(echo.latencies, 99);
  console.log(
    `Keystroke echo: ${echo.latencies.length} echoed (${fixed(echo.latencies.length / (echoCost.seconds || 1), 0)}/s) ` +
      `by ${live.length} sessions (${droppedIdle} dropped before), ${echo.failed} failed; latency p50 ` +
      `${fixed(percentile(echo.latencies, 50), 2)} ms, p99 ${fixed(echoP99, 2)} ms, max ` +
      `${fixed(echo.latencies.at(-1) ?? Number.NaN, 2)} ms`,
  );
  const rounds = [full, ...typingRounds];
  console.log(
    `\nKeystroke echo with all ${live.length} open and some of them typing (a key every ${KEY_INTERVAL_MS} ms):`,
  );
  printTable(
    [
      'typing sessions',
      'keys/s asked',
      'echoed/s',
      'p50 ms',
      'p99 ms',
      'failed',
      'gateway CPU %',
      'machine busy %',
    ],
    rounds.map((round) => [
      String(round.typing),
      fixed((round.typing * 1000) / KEY_INTERVAL_MS, 0),
      fixed(round.result.latencies.length / (round.gateway.seconds || 1), 0),
      fixed(percentile(round.result.latencies, 50), 1),
      fixed(percentile(round.result.latencies, 99), 1),
      String(round.result.failed),
      fixed(round.gateway.cpuPercent, 0),
      fixed(round.busy, 0),
    ]),
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
  const allOpen = shells.length === SESSIONS && dropped === 0 && echo.failed === 0;
  console.log(
    `         ${SESSIONS} concurrent sessions all open, echo p99 <= ${TARGETS.echoP99Ms} ms -> ` +
      `${shells.length} open, ${opened.refusedCount} refused, ${dropped} dropped, ${echo.failed} failed ` +
      `echoing, p99 ${fixed(echoP99, 1)} ms -> ${verdict(allOpen && echoP99 <= TARGETS.echoP99Ms)}; ` +
      `gateway ${fixed(rssPerSessionKiB(opened), 0)} KiB per session`,
  );
  const withinTarget = rounds.filter(
    (round) => round.result.failed === 0 && percentile(round.result.latencies, 99) <= TARGETS.echoP99Ms,
  );
  console.log(
    `         (not a target) the most of them typing at once with echo p99 <= ${TARGETS.echoP99Ms} ms: ` +
      (withinTarget.length
        ? `${Math.max(...withinTarget.map((round) => round.typing))}`
        : 'none of the rounds'),
  );
  await deleteHost();
  // After a clean stop: a profile asked for with --cpu-prof is written as the gateway exits.
  await gateway.child.stop();
});
