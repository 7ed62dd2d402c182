/**
 * The client side of egress verification: DNS questions on the wire, asked of the tunnel's resolver over UDP,
 * the IP echoes asked over HTTP(S), and the egress probe's DNS log. The egress test uses it on this machine;
 * the path check runs it inside a workspace's network namespace, where plain `node` imports this very file by
 * path (runtime/path-check.ts). So at run time it imports only Node.js modules and dns-packet, and its
 * TypeScript is only what Node.js can strip (types, no enums or parameter properties): test/egress/probe-client
 * loads it that way.
 */
import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import http from 'node:http';
import https from 'node:https';
import { isIP, isIPv4 } from 'node:net';
import tls from 'node:tls';
import dnsPacket from 'dns-packet';
import type { EgressProbe } from './settings.js';
import type { SocketAddress } from './tunnel-engine.js';

export type QueryType = 'A' | 'TXT';

/** Why a check failed: the code the start reports (RuntimeError) and a message naming what was seen. */
export interface CheckVerdict {
  code: 'upstream_unreachable' | 'exit_ip_mismatch' | 'dns_failed' | 'dns_leak' | 'probe_unreachable';
  message: string;
}

/** What one IP echo gave: an answer, or why there was none. */
export interface EchoOutcome {
  url: string;
  status?: number;
  body?: string;
  error?: string;
}

/** A DNS query; `chaos` asks in class CH, where resolvers keep their whoami names. */
export function encodeQuery(name: string, type: QueryType, chaos = false): Buffer {
  return dnsPacket.encode({
    id: randomBytes(2).readUInt16BE(0),
    type: 'query',
    flags: dnsPacket.RECURSION_DESIRED,
    questions: [{ type, name, class: chaos ? 'CH' : 'IN' }],
  });
}

export type DnsReply = { ok: true; packet: dnsPacket.DecodedPacket } | { ok: false; error: string };

/** Decodes a reply, turning a missing answer or an error rcode into a reason. */
export function decodeReply(reply: Buffer | undefined, error: string | undefined, what: string): DnsReply {
  if (reply === undefined) return { ok: false, error: `${what} got no answer (${error ?? 'no reply'})` };
  let packet: dnsPacket.DecodedPacket;
  try {
    packet = dnsPacket.decode(reply);
  } catch {
    return { ok: false, error: `${what} got an answer that is not DNS` };
  }
  const rcode = (packet.flags ?? 0) & 0x0f;
  if (rcode !== 0) return { ok: false, error: `${what} failed (DNS rcode ${rcode})` };
  return { ok: true, packet };
}

export function firstIPv4(packet: dnsPacket.DecodedPacket): string | null {
  for (const record of packet.answers ?? [])
    if (record.type === 'A' && isIPv4(record.data)) return record.data;
  return null;
}

export function txtText(packet: dnsPacket.DecodedPacket): string | null {
  const answer = packet.answers?.find((record) => record.type === 'TXT');
  if (answer?.type !== 'TXT') return null;
  const parts = (Array.isArray(answer.data) ? answer.data : [answer.data]) as (Buffer | string)[];
  return Buffer.concat(parts.map((part) => Buffer.from(part))).toString();
}

/**
 * Sends a query over UDP and waits for the reply with its id. The query goes out again every second, as a stub
 * resolver does: the tunnel's DoH client loses a lookup now and then and answers the next one.
 */
export function exchangeUdp(server: SocketAddress, query: Buffer, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = dgram.createSocket('udp4');
    const id = query.readUInt16BE(0);
    const send = () => socket.send(query, server.port, server.address);
    const retry = setInterval(send, 1000);
    const timer = setTimeout(() => done(() => reject(new Error('timed out'))), Math.max(0, timeoutMs));
    let finished = false;
    const done = (settle: () => void) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      clearInterval(retry);
      socket.close();
      settle();
    };
    socket.on('message', (message) => {
      if (message.length >= 2 && message.readUInt16BE(0) === id) done(() => resolve(message));
    });
    socket.on('error', (error) => done(() => reject(error)));
    send();
  });
}

/** One question to the tunnel's resolver, its answer decoded; `what` names the lookup in the reason. */
export function askResolver(
  server: SocketAddress,
  query: Buffer,
  timeoutMs: number,
  what: string,
): Promise<DnsReply> {
  return exchangeUdp(server, query, timeoutMs).then(
    (reply) => decodeReply(reply, undefined, what),
    (error: Error) => decodeReply(undefined, error.message, what),
  );
}

/** An echo's host as an IPv4 address: a name is resolved by the tunnel's resolver, never this machine's. */
export async function resolveIPv4(name: string, server: SocketAddress, timeoutMs: number): Promise<string> {
  if (isIPv4(name)) return name;
  const what = `the lookup of ${name} through the tunnel`;
  const reply = await askResolver(server, encodeQuery(name, 'A'), timeoutMs, what);
  if (!reply.ok) throw new Error(`${reply.error}; the tunnel resolves it through EGRESS_DOH_URL`);
  const address = firstIPv4(reply.packet);
  if (address === null) throw new Error(`${name} has no IPv4 address through the tunnel`);
  return address;
}

/** The request headers of an IP echo: one connection per echo, never kept for another. */
export const echoHeaders = (url: URL) => ({
  host: url.host,
  connection: 'close',
  'user-agent': 'cloud-cli-proxy egress check',
});

/** Extra CA certificates trusted besides the system's (the operator's own probe may have its own CA). */
export const trusting = (caPem: string | null) => (caPem ? { ca: [...tls.rootCertificates, caPem] } : {});

/** The start of an answer: an echo's address fits in far less, and nothing longer is read. */
export function readBody(response: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = '';
    response.setEncoding('utf8');
    response.on('data', (chunk: string) => {
      if (body.length < 4096) body += chunk;
    });
    response.on('end', () => resolve(body));
    response.on('error', reject);
  });
}

/** One IP echo asked straight of `address` (the echo's host, resolved): TLS still checks the URL's name. */
export function getEcho(
  url: string,
  address: string,
  options: { caPem: string | null; timeoutMs: number },
): Promise<EchoOutcome> {
  const target = new URL(url);
  const secure = target.protocol === 'https:';
  return new Promise((resolve) => {
    const request = (secure ? https : http).get(
      {
        host: address,
        port: target.port || (secure ? 443 : 80),
        path: target.pathname + target.search,
        agent: false,
        headers: echoHeaders(target),
        timeout: options.timeoutMs,
        ...(secure && !isIP(target.hostname) ? { servername: target.hostname } : {}),
        ...(secure ? trusting(options.caPem) : {}),
      },
      (response) => {
        readBody(response).then(
          (body) => resolve({ url, status: response.statusCode ?? 0, body }),
          (error: Error) => resolve({ url, error: error.message }),
        );
      },
    );
    request.on('timeout', () => request.destroy(new Error('timed out')));
    request.on('error', (error: NodeJS.ErrnoException) =>
      resolve({ url, error: error.code ?? error.message }),
    );
  });
}

/**
 * The address an echo reports: a bare address (`checkip`-style), `ip=<address>` among `key=value` lines
 * (a CDN trace), or `{"ip": …}`.
 */
export function parseEcho(body: string): string | null {
  const text = body.trim();
  if (isIP(text)) return text;
  const line = /^ip=(\S+)$/m.exec(text);
  if (line && isIP(line[1]!)) return line[1]!;
  try {
    const ip = (JSON.parse(text) as { ip?: unknown }).ip;
    if (typeof ip === 'string' && isIP(ip)) return ip;
  } catch {
    // not JSON
  }
  return null;
}

/** A fresh name under the probe's zone: nobody but this check ever asks for it. */
export function probeLeakName(probe: EgressProbe): string {
  return `${randomBytes(10).toString('hex')}.leak.${probe.dnsZone}`;
}

/** Who the probe's authoritative server saw asking for `name` (read by the control plane, not the workspace). */
export async function readProbeLog(probe: EgressProbe, name: string, timeoutMs: number): Promise<string[]> {
  const url = new URL('/dns-log', probe.url);
  url.searchParams.set('name', name);
  let response: Response;
  try {
    response = await fetch(url, {
      headers: { connection: 'close', ...(probe.token ? { authorization: `Bearer ${probe.token}` } : {}) },
      signal: AbortSignal.timeout(Math.max(1, timeoutMs)),
    });
  } catch (error) {
    throw new CheckError('probe_unreachable', `cannot read the probe's DNS log: ${(error as Error).message}`);
  }
  if (!response.ok)
    throw new CheckError('probe_unreachable', `the probe's DNS log answered HTTP ${response.status}`);
  const body = (await response.json()) as { queries?: { address: string }[] };
  return (body.queries ?? []).map((query) => query.address);
}

export class CheckError extends Error {
  readonly code: CheckVerdict['code'];

  constructor(code: CheckVerdict['code'], message: string) {
    super(message);
    this.code = code;
  }
}
