// Egress through every upstream protocol of the network lab: how long the admin's egress test takes, and what a
// tunnel costs in throughput and per-connection latency compared with the root namespace reaching the probe
// directly.
import { availableParallelism } from 'node:os';
import { performance } from 'node:perf_hooks';
import { TunnelEgressTester } from '../../apps/gateway/dist/egress/egress-tester.js';
import { tunnelDns } from '../../apps/gateway/dist/egress/egress-verification.js';
import { v2rayEngine } from '../../apps/gateway/dist/egress/v2ray-engine.js';
import { labEgressSettings } from '../../apps/gateway/test/helpers/lab-egress.js';
import { ensureLab, type LabDescription, type VariantName } from '../../test/lab/lab.js';
import { killChildrenNamed, onCleanup, runBench, sampleRss, startProcess } from '../lib/children.js';
import { freePort, waitForPort } from '../lib/net.js';
import { fixed, percentile, printTable } from '../lib/report.js';
import { get } from './http-get.js';

type ProxyConfig = Parameters<TunnelEgressTester['test']>[0];

const TEST_RUNS = 5;
const TARGET_TEST_MS = 1000;
const DOWNLOAD_RUNS = 3;
const LATENCY_REQUESTS = 30;
const DOWNLOAD_MB = Math.min(2000, Math.max(1, Number(process.env.BENCH_EGRESS_MB ?? 200) || 200));

const sortedOf = (values: number[]) => [...values].sort((a, b) => a - b);
const median = (values: number[]) => percentile(sortedOf(values), 50);
const mbPerSecond = (bytes: number, ms: number) => bytes / 1e6 / (ms / 1000);

interface PathFigures {
  /** Median MB/s of the downloads. */
  throughput: number;
  /** Median time of one fresh small request, ms. */
  latency: number;
  /** Answers of the IP echo that were not the expected address (traffic that took another path). */
  wrongExit: number;
  v2rayPeakMiB: number | null;
}

/** Fresh small requests, then the downloads, all through `socksPort` (or direct when null). */
async function measurePath(
  lab: LabDescription,
  socksPort: number | null,
  expectedIp: string,
): Promise<Omit<PathFigures, 'v2rayPeakMiB'>> {
  const base = new URL(lab.internet.httpUrl);
  const latencies: number[] = [];
  let wrongExit = 0;
  for (let i = 0; i < LATENCY_REQUESTS; i++) {
    const answer = await get(new URL('/ip', base), socksPort);
    latencies.push(answer.ms);
    if (answer.head.trim() !== expectedIp) wrongExit++;
  }
  const rates: number[] = [];
  for (let i = 0; i < DOWNLOAD_RUNS; i++) {
    const download = await get(new URL(`/bytes/${DOWNLOAD_MB * 1e6}`, base), socksPort);
    rates.push(mbPerSecond(download.bytes, download.ms));
  }
  return { throughput: median(rates), latency: median(latencies), wrongExit };
}

/** A v2ray client with the egress test's own config (renderTestConfig), its probe inbound being SOCKS. */
async function throughTunnel(
  lab: LabDescription,
  proxyConfig: ProxyConfig,
  exitIp: string,
): Promise<PathFigures> {
  const [socksPort, dnsPort] = [await freePort(), await freePort()];
  const config = v2rayEngine.renderTestConfig({
    // The lab's servers are IP literals: nothing to resolve.
    upstream: { config: proxyConfig, serverIp: proxyConfig.server },
    probeInbound: { protocol: 'socks', port: socksPort },
    dnsPort,
    dns: tunnelDns(labEgressSettings(lab)),
  });
  const v2ray = startProcess(
    `v2ray (${proxyConfig.type})`,
    v2rayEngine.defaultCommand,
    [...v2rayEngine.runArgs],
    {
      input: config,
      // Go trusts the lab CA (exits' and DoH certificates) through this.
      env: { PATH: process.env.PATH, SSL_CERT_FILE: lab.caCert },
    },
  );
  try {
    await Promise.race([
      waitForPort('127.0.0.1', socksPort, 5000),
      v2ray.exited.then((code) => Promise.reject(new Error(`v2ray exited (${code}): ${v2ray.stderrTail()}`))),
    ]);
    const rss = sampleRss(v2ray.pid);
    const figures = await measurePath(lab, socksPort, exitIp);
    return { ...figures, v2rayPeakMiB: rss.stop() };
  } finally {
    await v2ray.stop();
  }
}

await runBench('egress bench', 20 * 60_000, async () => {
  console.log(
    `Egress bench: ${availableParallelism()} CPUs, Node ${process.version}; the network lab ` +
      `(test/lab), downloads of ${DOWNLOAD_MB} MB`,
  );
  // The tester starts its own v2ray and stops it itself, but not when this process is interrupted meanwhile.
  onCleanup(async () => killChildrenNamed('v2ray'));
  process.once('exit', () => killChildrenNamed('v2ray'));

  const lab = await ensureLab();
  const exit = lab.exits[0]!;
  const tester = new TunnelEgressTester({
    engine: v2rayEngine,
    // The settings the gateway gets from labEgressEnv (the lab's own probe).
    settings: labEgressSettings(lab),
  });
  const only = process.env.BENCH_EGRESS_VARIANTS?.split(',').filter(Boolean);
  const names = (Object.keys(exit.variants) as VariantName[]).filter((name) => !only || only.includes(name));
  if (names.length === 0) throw new Error(`no lab variant matches BENCH_EGRESS_VARIANTS=${only?.join(',')}`);

  // One discarded run loads v2ray and the probe's code paths, so the first variant is not the odd one out.
  await tester.test(exit.variants[names[0]!].proxyConfig as ProxyConfig, exit.address);
  const direct = await measurePath(lab, null, lab.root.address);

  const testRows: string[][] = [];
  const pathRows: string[][] = [];
  let slowest = 0;
  for (const name of names) {
    const { proxyConfig } = exit.variants[name];
    const durations: number[] = [];
    const connects: number[] = [];
    let failed = 0;
    let firstError = '';
    for (let i = 0; i < TEST_RUNS; i++) {
      const began = performance.now();
      const result = await tester.test(proxyConfig as ProxyConfig, exit.address);
      durations.push(performance.now() - began);
      if (result.checks.connectivity.latency_ms !== null)
        connects.push(result.checks.connectivity.latency_ms);
      if (!result.ok) {
        failed++;
        firstError ||= Object.entries(result.checks)
          .filter(([, check]) => check.error)
          .map(([check, { error }]) => `${check}: ${error}`)
          .join('; ');
      }
    }
    const sorted = sortedOf(durations);
    slowest = Math.max(slowest, sorted.at(-1)!);
    testRows.push([
      name,
      `${TEST_RUNS - failed}/${TEST_RUNS}`,
      fixed(percentile(sorted, 50), 0),
      fixed(sorted.at(-1)!, 0),
      fixed(connects.length > 0 ? median(connects) : null, 0),
      firstError,
    ]);

    const tunnel = await throughTunnel(lab, proxyConfig as ProxyConfig, exit.address);
    pathRows.push([
      name,
      fixed(tunnel.throughput, 0),
      `${fixed(tunnel.throughput / direct.throughput, 2)}x`,
      fixed(tunnel.latency, 2),
      fixed(tunnel.latency - direct.latency, 2),
      `${fixed(tunnel.latency / direct.latency, 1)}x`,
      fixed(tunnel.v2rayPeakMiB, 0),
      String(tunnel.wrongExit),
    ]);
  }

  console.log(
    `\nEgress test (TunnelEgressTester: connectivity, exit IP, DNS leak through a short-lived v2ray), ` +
      `${TEST_RUNS} runs per variant through ${exit.name} (${exit.address})`,
  );
  printTable(['variant', 'passed', 'p50 ms', 'max ms', 'connect p50 ms', 'first failure'], testRows);

  console.log(
    `\nThrough the tunnel (v2ray with renderTestConfig, SOCKS inbound on 127.0.0.1) vs. direct from the root ` +
      `namespace to ${lab.internet.address}: median of ${DOWNLOAD_RUNS} downloads of ${DOWNLOAD_MB} MB ` +
      `(/bytes/<n>), and of ${LATENCY_REQUESTS} fresh GET /ip (connect to last byte)`,
  );
  printTable(
    ['path', 'MB/s', 'vs direct', 'GET /ip ms', 'added ms', 'vs direct', 'v2ray peak MiB', 'wrong exit'],
    [
      [
        'direct',
        fixed(direct.throughput, 0),
        '1.00x',
        fixed(direct.latency, 2),
        '0.00',
        '1.0x',
        '-',
        String(direct.wrongExit),
      ],
      ...pathRows,
    ],
  );
  console.log(
    `\nTarget: every egress test <= ${TARGET_TEST_MS} ms -> slowest ${fixed(slowest, 0)} ms -> ` +
      `${slowest <= TARGET_TEST_MS ? 'met' : 'NOT met'}`,
  );
});
