import dgram from 'node:dgram';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import {
  echoOutages,
  exitVerdict,
  probeLogVerdict,
  trustFor,
  type VerificationPlan,
  whoamiVerdict,
} from '../egress/egress-verification.js';
import {
  CheckError,
  type CheckVerdict,
  decodeReply,
  type EchoOutcome,
  encodeQuery,
  firstIPv4,
  probeLeakName,
  readProbeLog,
} from '../egress/probe-client.js';
import type { HeldNetns } from './early-netns.js';
import { GATEWAY_NETWORK, WORKSPACE_LINK } from './egress-gateway-files.js';
import { type CommandResult, runInNetns, runInNetnsAt } from './netns.js';
import type { StartTimings } from './start-timings.js';
import { RuntimeError } from './workspace-runtime.js';

export interface PathCheckTarget {
  workspacePid: number;
  gatewayPid: number;
  exitIp: string;
  /**
   * The control plane's address on the uplink network, which no workspace may reach except through the exit.
   */
  uplinkHostAddress: string;
}

export interface PathCheckOptions {
  /** Node.js executable run inside the workspace's namespace (the gateway's own). */
  nodeCommand: string;
  httpTimeoutMs: number;
  dnsTimeoutMs: number;
  /** Ends the check at once (a cancelled start): it may wait seconds on an upstream that never answers. */
  signal?: AbortSignal;
  /** The start's timing spans, which get the check's parts. */
  timings?: StartTimings;
  /** The program started ahead in the workspace's namespace; without one, the check starts its own. */
  program?: PathCheckProgram;
}

/** How long the program may take once it has its task. */
export const pathCheckBudgetMs = (options: { httpTimeoutMs: number; dnsTimeoutMs: number }) =>
  Math.max(options.httpTimeoutMs, options.dnsTimeoutMs) * 2 + 5000;

interface DnsOutcome {
  reply?: string;
  error?: string;
}

interface ProgramResult {
  echoes: EchoOutcome[];
  dns: DnsOutcome[];
  /** The whoami question asked over DoH, when the plan has one. */
  doh: DnsOutcome | null;
  /** When the program touched the canary (ms since the epoch, sub-millisecond). */
  touchedAt: number;
}

/**
 * The program below runs with the host's files, so it imports the probe client by path: this file's own
 * resolution gives the compiled module in a build and the TypeScript source under tsx, which Node.js loads
 * as it is (probe-client.ts says what that asks of it).
 */
const PROBE_CLIENT = import.meta.resolve('../egress/probe-client.js');

/**
 * What runs inside the workspace's network namespace (host binary, host files, workspace network): the IP
 * echoes (names resolved by the workspace's resolver, IPv4 only), DNS queries sent as given to that resolver,
 * one sent over DoH, and a TCP connection plus a UDP datagram to a canary. Plain CommonJS for `node -e`; the
 * verdicts are made outside. It starts (Node.js, the probe client) before the workspace is linked and waits
 * for its task on stdin, so a start does not wait for Node.js to start.
 *
 * The canary is touched first: on a direct path its packets would leave on the link ahead of every question
 * below, so they would arrive long before the answers through the tunnel come back. The program still waits
 * the canary window after the touch, when the answers come sooner.
 */
const PROGRAM = `'use strict';
const net = require('node:net');
const dgram = require('node:dgram');
const { performance } = require('node:perf_hooks');

function touch(canary) {
  const udp = dgram.createSocket('udp4');
  udp.on('error', () => udp.close());
  udp.send(Buffer.from('ccp-direct'), canary.udpPort, canary.address, () => udp.close());
  const socket = net.connect(canary.tcpPort, canary.address);
  socket.on('connect', () => socket.write('ccp-direct'));
  socket.on('error', () => {});
  return () => socket.destroy();
}

const task = new Promise((resolve) => {
  let text = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (chunk) => { text += chunk; });
  process.stdin.on('end', () => resolve(text));
});

// The canary is touched as soon as the task arrives, while the probe client may still be loading: its window
// then runs beside the load rather than after it.
const touched = task.then((text) => {
  if (!text) process.exit(0);
  const task = JSON.parse(text);
  const touchedAt = performance.timeOrigin + performance.now();
  const untouch = touch(task.canary);
  const window = new Promise((resolve) => setTimeout(resolve, task.canaryMs));
  return { task, touchedAt, untouch, window };
});

Promise.all([import(process.argv[1]), touched]).then(([client, { task, touchedAt, untouch, window }]) => {
  const echo = ({ url, trust }) =>
    client.resolveIPv4(new URL(url).hostname, task.dns, task.dnsMs).then(
      (address) => client.getEcho(url, address, { trust, timeoutMs: task.httpMs }),
      (error) => ({ url, error: error.message }),
    );
  const outcome = (asked) =>
    asked.then(
      (reply) => ({ reply: reply.toString('hex') }),
      (error) => ({ error: error.message }),
    );
  const ask = (query) => outcome(client.exchangeUdp(task.dns, Buffer.from(query, 'hex'), task.dnsMs));
  const doh = task.doh
    ? outcome(client.askDoh(task.doh.url, Buffer.from(task.doh.query, 'hex'), { trust: task.doh.trust, timeoutMs: task.dnsMs }))
    : null;
  return Promise.all([
    Promise.all(task.urls.map(echo)),
    Promise.all(task.queries.map(ask)),
    doh,
    window,
  ]).then(([echoes, dns, doh]) => {
    untouch();
    process.stdout.write(JSON.stringify({ echoes, dns, doh, touchedAt }));
  });
});
`;

/**
 * The least time the canary is given after the touch, however soon the answers through the tunnel come back. A
 * direct packet on one machine arrives in microseconds (the kernel forwards it while the program's send is
 * still in the kernel); this covers a loaded machine's scheduling. A failure names when the control plane saw
 * the first contact, its own scheduling included: the verdict is read only after the program has answered.
 */
const CANARY_WINDOW_MS = 100;

/**
 * The path check's program, started in the workspace's namespace ahead of the check (as soon as the namespace
 * exists, before the workspace is linked): Node.js starts and loads the probe client while the start goes on.
 * `discard` ends it when no check follows.
 */
export class PathCheckProgram {
  private giveTask: (task: string) => void = () => {};
  private withdraw: (reason: Error) => void = () => {};
  private readonly result: Promise<CommandResult>;

  /** `netns`: the workspace's namespace, a path nsenter opens (runInNetnsAt). */
  constructor(
    netns: string,
    options: {
      nodeCommand: string;
      timeoutMs: number;
      signal?: AbortSignal;
      /** The namespace `netns` names, held open until the program ends. */
      holding?: HeldNetns;
    },
  ) {
    const task = new Promise<string>((resolve, reject) => {
      this.giveTask = resolve;
      this.withdraw = reject;
    });
    this.result = runInNetnsAt(netns, options.nodeCommand, ['-e', PROGRAM, PROBE_CLIENT], {
      input: task,
      timeoutMs: options.timeoutMs,
      signal: options.signal,
    });
    // Awaited by run(); a discarded program's end is nobody's business.
    const release = () => options.holding?.release();
    this.result.then(release, release);
  }

  run(task: object): Promise<CommandResult> {
    this.giveTask(JSON.stringify(task));
    return this.result;
  }

  discard(): void {
    this.withdraw(new Error('no path check followed'));
  }
}

/**
 * Listens on the control plane's uplink address for TCP and UDP. Through the tunnel that address is
 * unreachable (the exit has no route to it), so any contact proves a path that bypasses the tunnel.
 */
class Canary {
  hits = 0;
  /** When the first contact came (ms since the epoch, sub-millisecond), to compare with the touch. */
  firstHitAt: number | null = null;
  private readonly tcp = net.createServer((socket) => {
    this.hit();
    socket.destroy();
  });
  private readonly udp = dgram.createSocket('udp4');

  private hit(): void {
    this.hits++;
    this.firstHitAt ??= performance.timeOrigin + performance.now();
  }

  async listen(address: string): Promise<{ address: string; tcpPort: number; udpPort: number }> {
    this.udp.on('message', () => this.hit());
    await new Promise<void>((resolve, reject) => {
      this.tcp.once('error', reject);
      this.tcp.listen(0, address, resolve);
    });
    await new Promise<void>((resolve, reject) => {
      this.udp.once('error', reject);
      this.udp.bind(0, address, resolve);
    });
    return {
      address,
      tcpPort: (this.tcp.address() as net.AddressInfo).port,
      udpPort: this.udp.address().port,
    };
  }

  close(): void {
    this.tcp.close();
    try {
      this.udp.close();
    } catch {
      // never bound
    }
  }
}

/**
 * Verifies a workspace's egress path from inside its network namespace, as the workspace itself sees it:
 *
 * - every IP echo of the plan (asked over HTTP(S), names resolved by the workspace's resolver) sees the declared
 *   exit IP;
 * - the whoami question (when the plan has one), asked over DoH with the resolver's certificate checked and of
 *   the workspace's own resolver, comes back with the exit IP; with a probe, a fresh name under its zone
 *   resolves through the workspace's resolver and the probe's authoritative server saw it asked only from the
 *   exit IP (its log read by the control plane over HTTPS);
 * - nothing reaches the uplink except through the exit: the egress gateway has its kill switch loaded and
 *   forwarding off (so no packet of any protocol, ICMP included, is routed out), and a TCP connection and a
 *   UDP datagram to the control plane's own uplink address (reachable directly, never from the exit) never
 *   arrive.
 *
 * Throws RuntimeError `direct_path_open`, `upstream_unreachable`, `exit_ip_mismatch`, `dns_failed`, `dns_leak`
 * or `probe_unreachable`.
 */
export async function verifyEgressPath(
  target: PathCheckTarget,
  plan: VerificationPlan,
  options: PathCheckOptions,
): Promise<{ echoesOut: string[] }> {
  const canary = new Canary();
  const span = <T>(name: string, work: () => Promise<T>) =>
    options.timings ? options.timings.span(`path check: ${name}`, work) : work();
  try {
    const leakName = plan.probe ? probeLeakName(plan.probe) : null;
    const queries = [
      ...(leakName ? [encodeQuery(leakName, 'A')] : []),
      ...(plan.whoami ? [encodeQuery(plan.whoami.name, 'TXT', true)] : []),
    ];
    const task = {
      urls: plan.exitIpUrls.map((url) => ({ url, trust: trustFor(plan, url) })),
      doh: plan.whoami
        ? {
            url: plan.whoami.dohUrl,
            query: encodeQuery(plan.whoami.name, 'TXT', true).toString('hex'),
            trust: trustFor(plan, plan.whoami.dohUrl),
          }
        : null,
      httpMs: options.httpTimeoutMs,
      dns: { address: WORKSPACE_LINK.gatewayAddress, port: 53 },
      dnsMs: options.dnsTimeoutMs,
      queries: queries.map((query) => query.toString('hex')),
      canary: await span('canary listens', () => canary.listen(target.uplinkHostAddress)),
      canaryMs: CANARY_WINDOW_MS,
    };
    const program =
      options.program ??
      new PathCheckProgram(`/proc/${target.workspacePid}/ns/net`, {
        nodeCommand: options.nodeCommand,
        timeoutMs: pathCheckBudgetMs(options),
        signal: options.signal,
      });
    const [output, gateway] = await Promise.all([
      span('program in the workspace', () => program.run(task)),
      span('egress gateway guards', () => gatewayGuards(target.gatewayPid)),
    ]);
    const result = JSON.parse(output.stdout) as ProgramResult;
    // A contact already in this machine's socket queues when the program answered is counted before the verdict.
    await new Promise((resolve) => setImmediate(resolve));

    if (canary.hits > 0) {
      const after =
        canary.firstHitAt === null
          ? ''
          : `, the first seen ${Math.max(0, canary.firstHitAt - result.touchedAt).toFixed(1)} ms after the touch`;
      throw new RuntimeError(
        'direct_path_open',
        `the workspace reached ${target.uplinkHostAddress} without the tunnel (${canary.hits} contacts${after})`,
      );
    }
    if (gateway) throw new RuntimeError('direct_path_open', gateway);
    fail(exitVerdict(result.echoes, target.exitIp, plan.minEchoAnswers));

    const replies = [...result.dns];
    const { probe } = plan;
    if (leakName && probe) {
      const outcome = replies.shift()!;
      const reply = decodeReply(hex(outcome.reply), outcome.error, `the lookup of ${leakName}`);
      if (!reply.ok) fail({ code: 'dns_failed', message: reply.error });
      else if (firstIPv4(reply.packet) === null)
        fail({ code: 'dns_failed', message: `the lookup of ${leakName} returned no address` });
      let queriers: string[];
      try {
        queriers = await span('probe log', () =>
          readProbeLog(probe, leakName, { trust: trustFor(plan, probe.url), timeoutMs: 5000 }),
        );
      } catch (error) {
        if (error instanceof CheckError) throw new RuntimeError(error.code, error.message);
        throw error;
      }
      fail(probeLogVerdict(queriers, leakName, target.exitIp));
    }
    if (plan.whoami && result.doh) {
      const { name } = plan.whoami;
      const overDoh = decodeReply(hex(result.doh.reply), result.doh.error, `the lookup of ${name} over DoH`);
      fail(whoamiVerdict(overDoh, name, target.exitIp, 'doh'));
      const outcome = replies.shift()!;
      const reply = decodeReply(hex(outcome.reply), outcome.error, `the lookup of ${name}`);
      fail(whoamiVerdict(reply, name, target.exitIp, 'tunnel'));
    }
    return { echoesOut: echoOutages(result.echoes) };
  } finally {
    canary.close();
  }
}

const hex = (text: string | undefined) => (text === undefined ? undefined : Buffer.from(text, 'hex'));

function fail(verdict: CheckVerdict | null): void {
  if (verdict) throw new RuntimeError(verdict.code, verdict.message);
}

/** The egress gateway's own guarantees, read from its namespace: a reason when one is missing. */
async function gatewayGuards(gatewayPid: number): Promise<string | null> {
  try {
    await runInNetns(gatewayPid, 'nft', ['list', 'table', 'inet', GATEWAY_NETWORK.table]);
  } catch {
    return 'the egress gateway has no kill switch loaded';
  }
  const { stdout } = await runInNetns(gatewayPid, 'sysctl', ['-n', 'net.ipv4.ip_forward']);
  return stdout.trim() === '0' ? null : 'IP forwarding is on in the egress gateway';
}
