/**
 * The client side of egress verification: DNS questions on the wire, asked of the tunnel's resolver over UDP or
 * of a DoH resolver over TLS, the IP echoes asked over HTTP(S), and the egress probe's DNS log (over HTTPS). The egress test uses it on this machine;
 * the path check runs it inside a workspace's network namespace, where plain `node` imports this very file by
 * path (runtime/path-check.ts). So at run time it imports only Node.js modules and dns-packet, and its
 * TypeScript is only what Node.js can strip (types, no enums or parameter properties): test/egress/probe-client
 * loads it that way.
 */
import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import type { IncomingMessage } from 'node:http';
import https from 'node:https';
import { isIP, isIPv4, type Socket } from 'node:net';
import tls from 'node:tls';
import dnsPacket from 'dns-packet';
import type { EgressProbe } from './settings.js';
import type { SocketAddress } from './tunnel-engine.js';

/**
 * Not imported: an ES import of node:http reads every export to build its namespace, and its WebSocket getter
 * loads undici, about 25 ms of the path check's program loading this file (inside a start's critical path).
 */
const http = process.getBuiltinModule('node:http');

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

/**
 * Whom a TLS connection trusts: the system's CA certificates plus `extra` (EGRESS_TLS_CA_FILE), or `pinned`
 * alone (EGRESS_PROBE_CA_FILE: the operator's own probe, whose certificate no public CA should be able to stand
 * in for).
 */
export interface Trust {
  extra: string | null;
  pinned: string | null;
}

export function trusting(trust: Trust): { ca?: string[] } {
  if (trust.pinned) return { ca: [trust.pinned] };
  return trust.extra ? { ca: [...tls.rootCertificates, trust.extra] } : {};
}

/**
 * TLS to `url`'s host and port, its certificate checked for the URL's name or address; over `socket` when one
 * is given (a CONNECT through the tunnel), else dialled directly.
 */
export function connectTls(url: URL, trust: Trust, socket?: Socket): tls.TLSSocket {
  const host = url.hostname;
  return tls.connect({
    ...(socket ? { socket } : { port: Number(url.port || 443) }),
    host,
    ...(isIP(host) ? {} : { servername: host }),
    ...trusting(trust),
  });
}

/**
 * One DNS question asked of a DoH resolver (RFC 8484, POST) over TLS whose certificate is checked: nobody on
 * the way can read the question or answer it in the resolver's place.
 */
export function askDoh(
  dohUrl: string,
  query: Buffer,
  options: { trust: Trust; timeoutMs: number; socket?: Socket },
): Promise<Buffer> {
  const url = new URL(dohUrl);
  return new Promise((resolve, reject) => {
    const secure = connectTls(url, options.trust, options.socket);
    const timer = setTimeout(() => request.destroy(new Error('timed out')), Math.max(0, options.timeoutMs));
    const settle = (error: Error | null, reply?: Buffer) => {
      clearTimeout(timer);
      secure.destroy();
      if (error) reject(error);
      else resolve(reply!);
    };
    const request = http.request(
      {
        createConnection: () => secure,
        method: 'POST',
        path: url.pathname + url.search,
        headers: {
          host: url.host,
          connection: 'close',
          'content-type': 'application/dns-message',
          accept: 'application/dns-message',
          'content-length': query.length,
        },
      },
      (response) => {
        const chunks: Buffer[] = [];
        let length = 0;
        response.on('data', (chunk: Buffer) => {
          length += chunk.length;
          if (length <= 65_535) chunks.push(chunk);
        });
        response.on('end', () =>
          response.statusCode === 200
            ? settle(null, Buffer.concat(chunks))
            : settle(new Error(`${url.origin} answered HTTP ${response.statusCode}`)),
        );
        response.on('error', (error) => settle(error));
      },
    );
    request.on('error', (error: NodeJS.ErrnoException) => settle(new Error(error.code ?? error.message)));
    request.end(query);
  });
}

/** The start of an answer: an echo's address fits in far less, and nothing longer is read. */
export function readBody(response: IncomingMessage, limit = 4096): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = '';
    response.setEncoding('utf8');
    response.on('data', (chunk: string) => {
      if (body.length < limit) body += chunk;
    });
    response.on('end', () => resolve(body));
    response.on('error', reject);
  });
}

/** One IP echo asked straight of `address` (the echo's host, resolved): TLS still checks the URL's name. */
export function getEcho(
  url: string,
  address: string,
  options: { trust: Trust; timeoutMs: number },
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
        ...(secure ? trusting(options.trust) : {}),
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

/**
 * Who the probe's authoritative server saw asking for `name` (read by the control plane, not the workspace),
 * over HTTPS only: the token and the log must not be readable or answerable by anyone on the way.
 */
export async function readProbeLog(
  probe: EgressProbe,
  name: string,
  options: { trust: Trust; timeoutMs: number },
): Promise<string[]> {
  const url = new URL('/dns-log', probe.url);
  url.searchParams.set('name', name);
  if (url.protocol !== 'https:')
    throw new CheckError(
      'probe_unreachable',
      `the probe's DNS log is read over HTTPS only (not ${url.origin})`,
    );
  const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const request = https.get(
      {
        host: url.hostname,
        port: url.port || 443,
        path: url.pathname + url.search,
        agent: false,
        timeout: Math.max(1, options.timeoutMs),
        headers: { connection: 'close', ...(probe.token ? { authorization: `Bearer ${probe.token}` } : {}) },
        ...trusting(options.trust),
      },
      (response) =>
        readBody(response, 1 << 20).then(
          (text) => resolve({ status: response.statusCode ?? 0, body: text }),
          reject,
        ),
    );
    request.on('timeout', () => request.destroy(new Error('timed out')));
    request.on('error', (error: NodeJS.ErrnoException) =>
      reject(
        new CheckError(
          'probe_unreachable',
          `cannot read the probe's DNS log: ${error.code ?? error.message}`,
        ),
      ),
    );
  });
  if (status !== 200)
    throw new CheckError('probe_unreachable', `the probe's DNS log answered HTTP ${status}`);
  let parsed: { queries?: { address: string }[] };
  try {
    parsed = JSON.parse(body) as typeof parsed;
  } catch {
    throw new CheckError('probe_unreachable', "the probe's DNS log answered something that is not JSON");
  }
  return (parsed.queries ?? []).map((query) => query.address);
}

export class CheckError extends Error {
  readonly code: CheckVerdict['code'];

  constructor(code: CheckVerdict['code'], message: string) {
    super(message);
    this.code = code;
  }
}
