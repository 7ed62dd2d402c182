/**
 * Typed access to the egress network lab that `lab.sh` builds (see the comment at the top of lab.sh).
 *
 *   const lab = await ensureLab();                 // builds it when needed, returns lab.json
 *   const v = variant(lab, 'vmess-ws-tls');        // exit 1 unless an exit index is given
 *   post('/v1/admin/egress-ips', { ip_address: v.exit.address, proxy_config: v.proxyConfig, ... });
 *   await readDnsLog(lab, name);                   // who asked the probe's DNS for `name`
 *   await resetSourceCounters(); ...; await readSourceCounters();  // packets per source, fake internet
 *
 * TLS variants use certificates from the lab CA (`lab.caCert`); a v2ray started by a test trusts it when its
 * environment has SSL_CERT_FILE=<lab.caCert> (Go reads it), which also covers the probe's DoH endpoint.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { needs } from '../support/needs.js';

const run = promisify(execFile);

export const LAB_SCRIPT = fileURLToPath(new URL('./lab.sh', import.meta.url));
export const LAB_RUN_DIR = process.env.CCP_LAB_RUN_DIR ?? '/run/ccp-lab';
export const LAB_DESCRIPTION = join(LAB_RUN_DIR, 'lab.json');

export type LabProtocol = 'socks' | 'http' | 'shadowsocks' | 'vmess' | 'vless' | 'trojan';

export type VariantName =
  | 'socks'
  | 'socks-auth'
  | 'http-auth'
  | 'http-auth-tls'
  | 'ss-aes-128-gcm'
  | 'ss-aes-256-gcm'
  | 'ss-chacha20-ietf-poly1305'
  | 'vmess-tcp'
  | 'vmess-tls'
  | 'vmess-ws'
  | 'vmess-ws-tls'
  | 'vless-tcp'
  | 'vless-tls'
  | 'vless-ws-tls'
  | 'trojan-tls';

/** The sing-box outbound (the API's `proxy_config`) that reaches one v2ray inbound of an exit node. */
export interface LabProxyConfig {
  type: LabProtocol;
  server: string;
  server_port: number;
  version?: '5';
  username?: string;
  password?: string;
  method?: 'aes-128-gcm' | 'aes-256-gcm' | 'chacha20-ietf-poly1305';
  uuid?: string;
  security?: 'auto';
  alter_id?: 0;
  tls?: { enabled: true; server_name: string };
  transport?: { type: 'ws'; path: string };
}

export interface LabVariant {
  protocol: LabProtocol;
  port: number;
  tls: boolean;
  transport: 'tcp' | 'ws';
  wsPath?: string;
  proxyConfig: LabProxyConfig;
}

export interface LabExit {
  name: string;
  namespace: string;
  /** What the probe sees when traffic leaves through this exit. */
  address: string;
  address6: string;
  /** In the exit's certificate next to its IP; `proxyConfig.tls.server_name` uses it. */
  tlsServerName: string;
  variants: Record<VariantName, LabVariant>;
}

export interface LabDescription {
  version: 1;
  runDir: string;
  /** PEM of the lab CA that signed the exits' and the probe's certificates. */
  caCert: string;
  /** The root namespace's end of the lab: its only routes into the lab go through the router. */
  root: {
    link: string;
    address: string;
    address6: string;
    gateway: string;
    gateway6: string;
    routes: string[];
  };
  router: { namespace: string };
  /** The "fake internet": the egress probe. */
  internet: {
    namespace: string;
    address: string;
    address6: string;
    /** IP echo (`/ip`, `/ip.json`), `/bytes/<n>`, `/dns-log?name=` (needs `dnsLogToken`). */
    httpUrl: string;
    httpsUrl: string;
    /** RFC 8484, GET and POST, certificate from the lab CA for the IP address. */
    dohUrl: string;
    /** Authoritative for `zone`, UDP and TCP; it is also every lab namespace's resolver. */
    dns: { address: string; port: number };
    zone: string;
    /** Every name under the zone resolves to this (A only); `whoami.*` names answer the querier instead. */
    answerAddress: string;
    dnsLogToken: string;
    tlsServerName: string;
  };
  /** The first exit node's address; each exit has the same inbounds and credentials. */
  exitAddress: string;
  credentials: {
    socks: { username: string; password: string };
    http: { username: string; password: string };
    shadowsocks: { password: string };
    vmess: { uuid: string };
    vless: { uuid: string };
    trojan: { password: string };
  };
  exits: LabExit[];
  /** Stand-ins for the public endpoints the gateway verifies with by default (docs/egress-probe.md). */
  public: LabPublic;
}

/** The lab's stand-ins for public services, at its own documentation addresses. */
export interface LabPublic {
  /** The zone of public names (`www.<zone>`, `checkip.<zone>`), answered by the stand-in resolver. */
  zone: string;
  /** Stands in for a public recursive resolver with DoH and a whoami name (Cloudflare's 1.1.1.1). */
  resolver: {
    address: string;
    dns: { address: string; port: number };
    dohUrl: string;
    /** An IP echo in the trace format (`ip=<caller>` among key=value lines). */
    traceUrl: string;
    /** TXT (class CH or IN) answered with the asker's address. */
    whoamiName: string;
    /** Who asked the resolver for a name: `GET <logUrl>?name=` with the bearer token. */
    logUrl: string;
    logToken: string;
  };
  /** Stands in for a second, independent IP echo reached by name (Amazon's checkip). */
  checkip: { address: string; name: string; url: string };
  /** A public web site: `/` a known page, `/ip` the caller's address. */
  web: { name: string; address: string; httpUrl: string; httpsUrl: string };
}

export interface DnsLogEntry {
  address: string;
  transport: 'udp' | 'tcp' | 'doh';
  type: string;
  at: string;
}

export interface SourceCounter {
  address: string;
  packets: number;
  bytes: number;
}

/** Why the lab cannot run here, or undefined when it can; for `test(..., { skip: labUnavailable() })`. */
export function labUnavailable(): string | undefined {
  return needs('lab') || undefined;
}

async function labCommand(...args: string[]): Promise<string> {
  try {
    // Package installation may run on a fresh machine, hence the generous timeout.
    const { stdout } = await run('bash', [LAB_SCRIPT, ...args], { timeout: 600_000, maxBuffer: 64 << 20 });
    return stdout;
  } catch (error) {
    const { stderr, stdout } = error as { stderr?: string; stdout?: string };
    throw new Error(
      `lab.sh ${args.join(' ')} failed: ${(error as Error).message}\n${stdout ?? ''}${stderr ?? ''}`,
    );
  }
}

/** The description of a running lab, or undefined when there is none. */
export async function readLab(): Promise<LabDescription | undefined> {
  try {
    return JSON.parse(await readFile(LAB_DESCRIPTION, 'utf8')) as LabDescription;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/**
 * Builds the lab unless it is already healthy, and returns its description. Safe to call from several test
 * processes at once: lab.sh serialises them, and a healthy lab is left as it is.
 */
export async function ensureLab(): Promise<LabDescription> {
  await labCommand('up');
  const lab = await readLab();
  if (!lab) throw new Error(`lab.sh up succeeded but ${LAB_DESCRIPTION} is missing`);
  return lab;
}

/** Removes the whole lab. Other test processes using it at the same time lose it. */
export async function stopLab(): Promise<void> {
  await labCommand('down');
}

export function variant(
  lab: LabDescription,
  name: VariantName,
  exitIndex = 0,
): LabVariant & { exit: LabExit } {
  const exit = lab.exits[exitIndex];
  if (!exit) throw new Error(`the lab has ${lab.exits.length} exits, not ${exitIndex + 1}`);
  return { ...exit.variants[name], exit };
}

/** Who asked the probe's DNS (UDP, TCP or DoH) for `name`, read straight from the root namespace. */
export async function readDnsLog(lab: LabDescription, name: string): Promise<DnsLogEntry[]> {
  const url = `${lab.internet.httpUrl}/dns-log?name=${encodeURIComponent(name)}`;
  const res = await fetch(url, {
    headers: { authorization: `Bearer ${lab.internet.dnsLogToken}`, connection: 'close' },
    signal: AbortSignal.timeout(5000),
  });
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { queries: DnsLogEntry[] }).queries;
}

interface NftSetListing {
  nftables: Array<{
    set?: {
      name: string;
      elem?: Array<{ elem: { val: string; counter: { packets: number; bytes: number } } }>;
    };
  }>;
}

/** Packets and bytes that reached the fake internet per source address (v4 and v6) since the last reset. */
export async function readSourceCounters(): Promise<SourceCounter[]> {
  const listing = JSON.parse(await labCommand('counters')) as NftSetListing;
  return listing.nftables.flatMap((item) =>
    (item.set?.elem ?? []).map(({ elem }) => ({ address: elem.val, ...elem.counter })),
  );
}

/**
 * Resets the TCP connections the fake internet still holds: those of a workspace removed mid-connection stay
 * open on its exit's side, whose keepalives would count against the next test.
 */
export async function closeInternetConnections(): Promise<void> {
  await labCommand('close-connections');
}

export async function resetSourceCounters(): Promise<void> {
  await labCommand('counters', 'reset');
}

/**
 * Resets the counters once nothing reaches the fake internet any more: an exit closes its connections of an
 * earlier test a few seconds after the client went (v2ray's uplink/downlink-only timeouts), and those packets
 * must not count against the next one. Gives up waiting after `timeoutMs` and resets all the same.
 */
export async function resetSourceCountersWhenQuiet(timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  await resetSourceCounters();
  while (Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    if ((await readSourceCounters()).length === 0) return;
    await resetSourceCounters();
  }
}

function publicOf(lab: LabDescription): LabPublic {
  // A lab.json written before the stand-ins existed: its lab is torn down and built again by the next `up`.
  if (!lab.public) throw new Error('this lab has no public stand-ins: run `bash test/lab/lab.sh up` again');
  return lab.public;
}

/**
 * The gateway settings that point its public defaults at the lab's stand-ins, exactly as an operator would set
 * them (no probe of its own): `lab.sh env` prints the same.
 */
export function labPublicEgressEnv(lab: LabDescription): Record<string, string> {
  const { resolver, checkip } = publicOf(lab);
  return {
    EGRESS_DOH_URL: resolver.dohUrl,
    EGRESS_DNS_SERVER: `${resolver.dns.address}:${resolver.dns.port}`,
    EGRESS_DNS_WHOAMI: resolver.whoamiName,
    EGRESS_EXIT_IP_URLS: `${resolver.traceUrl},${checkip.url}`,
    EGRESS_TLS_CA_FILE: lab.caCert,
  };
}

export interface ResolverLogEntry {
  address: string;
  transport: 'udp' | 'tcp' | 'doh';
  type: string;
  at: string;
}

/** Who asked the stand-in resolver for `name`, read straight from the root namespace. */
export async function readResolverLog(lab: LabDescription, name: string): Promise<ResolverLogEntry[]> {
  const { resolver } = publicOf(lab);
  const url = `${resolver.logUrl}?name=${encodeURIComponent(name)}`;
  const res = await fetch(url, {
    headers: { authorization: `Bearer ${resolver.logToken}`, connection: 'close' },
    signal: AbortSignal.timeout(5000),
  });
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { queries: ResolverLogEntry[] }).queries;
}
