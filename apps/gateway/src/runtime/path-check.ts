import dgram from 'node:dgram';
import net from 'node:net';
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
import { GATEWAY_NETWORK, WORKSPACE_LINK } from './egress-gateway-files.js';
import { runInNetns } from './netns.js';
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
}

interface DnsOutcome {
  reply?: string;
  error?: string;
}

interface ProgramResult {
  echoes: EchoOutcome[];
  dns: DnsOutcome[];
  /** The whoami question asked over DoH, when the plan has one. */
  doh: DnsOutcome | null;
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
 * verdicts are made outside.
 */
const PROGRAM = `'use strict';
const net = require('node:net');
const dgram = require('node:dgram');
const task = JSON.parse(process.argv[1]);

function touch(canary, ms) {
  return new Promise((resolve) => {
    const udp = dgram.createSocket('udp4');
    udp.on('error', () => udp.close());
    udp.send(Buffer.from('ccp-direct'), canary.udpPort, canary.address, () => udp.close());
    const socket = net.connect(canary.tcpPort, canary.address);
    socket.on('connect', () => socket.write('ccp-direct'));
    socket.on('error', () => {});
    setTimeout(() => { socket.destroy(); resolve(); }, ms);
  });
}

import(task.probeClient).then((client) => {
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
    touch(task.canary, task.canaryMs),
  ]);
}).then(([echoes, dns, doh]) => process.stdout.write(JSON.stringify({ echoes, dns, doh })));
`;

/**
 * How long a direct packet may take to reach the canary; a direct path on one machine answers in
 * microseconds.
 */
const CANARY_WINDOW_MS = 300;

/**
 * Listens on the control plane's uplink address for TCP and UDP. Through the tunnel that address is
 * unreachable (the exit has no route to it), so any contact proves a path that bypasses the tunnel.
 */
class Canary {
  hits = 0;
  private readonly tcp = net.createServer((socket) => {
    this.hits++;
    socket.destroy();
  });
  private readonly udp = dgram.createSocket('udp4');

  async listen(address: string): Promise<{ address: string; tcpPort: number; udpPort: number }> {
    this.udp.on('message', () => this.hits++);
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
      probeClient: PROBE_CLIENT,
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
    const budget = Math.max(options.httpTimeoutMs, options.dnsTimeoutMs) * 2 + 5000;
    const [program, gateway] = await Promise.all([
      span('program in the workspace', () =>
        runInNetns(target.workspacePid, options.nodeCommand, ['-e', PROGRAM, JSON.stringify(task)], {
          timeoutMs: budget,
          signal: options.signal,
        }),
      ),
      span('egress gateway guards', () => gatewayGuards(target.gatewayPid)),
    ]);
    const result = JSON.parse(program.stdout) as ProgramResult;

    if (canary.hits > 0) {
      throw new RuntimeError(
        'direct_path_open',
        `the workspace reached ${target.uplinkHostAddress} without the tunnel (${canary.hits} contacts)`,
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
