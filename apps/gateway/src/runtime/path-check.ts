import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import net from 'node:net';
import dnsPacket from 'dns-packet';
import { GATEWAY_NETWORK, WORKSPACE_LINK } from './egress-gateway-files.js';
import { runInNetns } from './netns.js';
import { RuntimeError } from './workspace-runtime.js';

/**
 * The egress probe (config.egress with every endpoint set): an IP echo, an authoritative DNS zone and its
 * log.
 */
export interface PathProbeSettings {
  /** `http://<IPv4 literal>/…`, answering with the caller's address. */
  probeUrl: string;
  dnsZone: string;
  probeToken: string | null;
}

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
}

interface HttpOutcome {
  status?: number;
  body?: string;
  error?: string;
}

interface DnsOutcome {
  reply?: string;
  error?: string;
}

interface ProgramResult {
  http: HttpOutcome;
  dns: DnsOutcome[];
}

/**
 * What runs inside the workspace's network namespace (host binary, host files, workspace network): one HTTP
 * GET, DNS queries sent as given to the workspace's resolver, and a TCP connection plus a UDP datagram to a
 * canary. Plain CommonJS for `node -e`, so it needs nothing from this package; the verdicts are made outside.
 */
const PROGRAM = `'use strict';
const http = require('node:http');
const net = require('node:net');
const dgram = require('node:dgram');
const task = JSON.parse(process.argv[1]);

function get(url, ms) {
  return new Promise((resolve) => {
    const options = { agent: false, headers: { connection: 'close' }, timeout: ms };
    const request = http.get(url, options, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => { if (body.length < 4096) body += chunk; });
      response.on('end', () => resolve({ status: response.statusCode, body }));
      response.on('error', (error) => resolve({ error: error.message }));
    });
    request.on('timeout', () => request.destroy(new Error('timed out')));
    request.on('error', (error) => resolve({ error: error.code || error.message }));
  });
}

function ask(query, server, ms) {
  return new Promise((resolve) => {
    const socket = dgram.createSocket('udp4');
    const packet = Buffer.from(query, 'hex');
    const send = () => socket.send(packet, server.port, server.address);
    const retry = setInterval(send, 1000);
    const timer = setTimeout(() => done({ error: 'timed out' }), ms);
    function done(result) {
      clearInterval(retry);
      clearTimeout(timer);
      socket.close();
      resolve(result);
    }
    socket.on('message', (message) => done({ reply: message.toString('hex') }));
    socket.on('error', (error) => done({ error: error.message }));
    send();
  });
}

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

Promise.all([
  get(task.url, task.httpMs),
  Promise.all(task.queries.map((query) => ask(query, task.dns, task.dnsMs))),
  touch(task.canary, task.canaryMs),
]).then(([http, dns]) => process.stdout.write(JSON.stringify({ http, dns })));
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

const sameAddress = (a: string, b: string) => a.replace(/^::ffff:/, '') === b.replace(/^::ffff:/, '');

function encodeQuery(name: string, type: 'A' | 'TXT'): string {
  return dnsPacket
    .encode({
      id: randomBytes(2).readUInt16BE(0),
      type: 'query',
      flags: dnsPacket.RECURSION_DESIRED,
      questions: [{ type, name }],
    })
    .toString('hex');
}

/**
 * Verifies a workspace's egress path from inside its network namespace, as the workspace itself sees it:
 *
 * - the probe (an IPv4 literal) sees the declared exit IP;
 * - a fresh name under the probe's zone resolves through the workspace's resolver, and the probe's
 *   authoritative server saw that name asked only from the exit IP; a TXT `whoami` (the tunnel's TCP DNS
 *   path) says the same;
 * - nothing reaches the uplink except through the exit: the egress gateway has its kill switch loaded and
 *   forwarding off (so no packet of any protocol, ICMP included, is routed out), and a TCP connection and a
 *   UDP datagram to the control plane's own uplink address (reachable directly, never from the exit) never
 *   arrive.
 *
 * Throws RuntimeError `direct_path_open`, `upstream_unreachable`, `exit_ip_mismatch`, `dns_failed` or
 * `dns_leak`.
 */
export async function verifyEgressPath(
  target: PathCheckTarget,
  probe: PathProbeSettings,
  options: PathCheckOptions,
): Promise<void> {
  const canary = new Canary();
  try {
    const leakName = `${randomBytes(10).toString('hex')}.leak.${probe.dnsZone}`;
    const task = {
      url: probe.probeUrl,
      httpMs: options.httpTimeoutMs,
      dns: { address: WORKSPACE_LINK.gatewayAddress, port: 53 },
      dnsMs: options.dnsTimeoutMs,
      queries: [encodeQuery(leakName, 'A'), encodeQuery(`whoami.${probe.dnsZone}`, 'TXT')],
      canary: await canary.listen(target.uplinkHostAddress),
      canaryMs: CANARY_WINDOW_MS,
    };
    const budget = Math.max(options.httpTimeoutMs, options.dnsTimeoutMs) + 5000;
    const [program, gateway] = await Promise.all([
      runInNetns(target.workspacePid, options.nodeCommand, ['-e', PROGRAM, JSON.stringify(task)], {
        timeoutMs: budget,
      }),
      gatewayGuards(target.gatewayPid),
    ]);
    const result = JSON.parse(program.stdout) as ProgramResult;

    if (canary.hits > 0) {
      throw new RuntimeError(
        'direct_path_open',
        `the workspace reached ${target.uplinkHostAddress} without the tunnel (${canary.hits} contacts)`,
      );
    }
    if (gateway) throw new RuntimeError('direct_path_open', gateway);
    checkExit(result.http, target.exitIp, probe.probeUrl);
    await checkDns(result.dns, leakName, target.exitIp, probe);
  } finally {
    canary.close();
  }
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

function checkExit(outcome: HttpOutcome, exitIp: string, probeUrl: string): void {
  if (outcome.error !== undefined || outcome.status !== 200) {
    const why = outcome.error ?? `HTTP ${outcome.status}`;
    throw new RuntimeError(
      'upstream_unreachable',
      `no answer from ${probeUrl} through the upstream (${why})`,
    );
  }
  const observed = (outcome.body ?? '').trim();
  if (!sameAddress(observed, exitIp)) {
    throw new RuntimeError(
      'exit_ip_mismatch',
      `the workspace leaves from ${observed || 'an unknown address'}, not the declared ${exitIp}`,
    );
  }
}

async function checkDns(
  outcomes: DnsOutcome[],
  leakName: string,
  exitIp: string,
  probe: PathProbeSettings,
): Promise<void> {
  const [address, whoami] = outcomes.map((outcome, index) => {
    const what = index === 0 ? `the lookup of ${leakName}` : 'the TXT lookup of whoami';
    if (outcome.reply === undefined)
      throw new RuntimeError('dns_failed', `${what} got no answer (${outcome.error})`);
    const answer = dnsPacket.decode(Buffer.from(outcome.reply, 'hex'));
    const rcode = (answer.flags ?? 0) & 0x0f;
    if (rcode !== 0) throw new RuntimeError('dns_failed', `${what} failed (DNS rcode ${rcode})`);
    return answer;
  }) as [dnsPacket.DecodedPacket, dnsPacket.DecodedPacket];
  if (!address.answers?.some((answer) => answer.type === 'A'))
    throw new RuntimeError('dns_failed', `the lookup of ${leakName} returned no address`);

  const seen = await queriers(probe, leakName);
  if (seen.length === 0)
    throw new RuntimeError(
      'dns_leak',
      `the probe never saw the lookup of ${leakName}: it was answered elsewhere`,
    );
  const strangers = [...new Set(seen.filter((source) => !sameAddress(source, exitIp)))];
  if (strangers.length > 0)
    throw new RuntimeError('dns_leak', `the probe saw the workspace's lookup from ${strangers.join(', ')}`);

  const txt = whoami.answers?.find((answer) => answer.type === 'TXT');
  const text = txt ? Buffer.concat((txt.data as Buffer[]).map((part) => Buffer.from(part))).toString() : null;
  if (text === null || !sameAddress(text, exitIp))
    throw new RuntimeError(
      'dns_leak',
      `a TXT lookup reached the probe from ${text ?? 'nowhere'}, not ${exitIp}`,
    );
}

/**
 * Who the probe's authoritative server saw asking for `name` (read by the control plane, not the workspace).
 */
async function queriers(probe: PathProbeSettings, name: string): Promise<string[]> {
  const url = new URL('/dns-log', probe.probeUrl);
  url.searchParams.set('name', name);
  let response: Response;
  try {
    response = await fetch(url, {
      headers: probe.probeToken ? { authorization: `Bearer ${probe.probeToken}` } : {},
      signal: AbortSignal.timeout(5000),
    });
  } catch (error) {
    throw new RuntimeError(
      'probe_unreachable',
      `cannot read the probe's DNS log: ${(error as Error).message}`,
    );
  }
  if (!response.ok)
    throw new RuntimeError('probe_unreachable', `the probe's DNS log answered HTTP ${response.status}`);
  const body = (await response.json()) as { queries?: { address: string }[] };
  return (body.queries ?? []).map((query) => query.address);
}
