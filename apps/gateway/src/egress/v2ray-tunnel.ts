import { isIP } from 'node:net';
import type { ResolvedUpstream, SocketAddress, TunnelDnsSettings } from './tunnel-engine.js';
import { toV2rayOutbound, type V2rayOutbound, type V2rayStreamSettings } from './v2ray-outbound.js';

export interface V2rayInbound {
  tag: string;
  listen: string;
  port: number;
  protocol: string;
  settings: Record<string, unknown>;
  streamSettings?: V2rayStreamSettings;
  sniffing?: { enabled: boolean; destOverride: ('http' | 'tls')[] };
}

export interface V2rayRoutingRule {
  type: 'field';
  inboundTag: string[];
  port?: string;
  /** Egress policy (v2ray-policy.ts): names as sniffed, and addresses or CIDR blocks. */
  domain?: string[];
  ip?: string[];
  outboundTag: string;
}

/** A v2ray DNS server: a DoH URL, or one that answers only the listed domains. */
export type V2rayDnsServer = string | { address: string; domains: string[] };

/** The parts of a v2ray 4.34 config we write. */
export interface V2rayConfig {
  dns: { servers: V2rayDnsServer[]; tag: string };
  inbounds: V2rayInbound[];
  outbounds: V2rayOutbound[];
  routing: { domainStrategy: 'AsIs'; rules: V2rayRoutingRule[] };
  /** Traffic counters (v2ray-stats.ts): present when the config exposes them. */
  stats?: Record<string, never>;
  api?: { tag: string; services: string[] };
  policy?: { system: { statsInboundUplink: boolean; statsInboundDownlink: boolean } };
  /** Only while an egress policy records its decisions (v2ray-decisions.ts). */
  log?: { error: string; loglevel: 'info' };
}

export const PROXY_TAG = 'proxy';
export const DNS_OUT_TAG = 'dns-out';
export const DNS_IN_TAG = 'dns-in';
const DNS_INTERNAL_TAG = 'dns-internal';

export interface TunnelParts {
  upstream: ResolvedUpstream;
  mark?: number;
  dns: TunnelDnsSettings;
  dnsListen: SocketAddress;
  /** Inbounds besides the DNS one. */
  inbounds: V2rayInbound[];
  /** Rules for those inbounds; unmatched traffic takes the first outbound, the upstream. */
  rules: V2rayRoutingRule[];
}

/**
 * A tunnel whose only way out is the upstream. DNS is answered by v2ray's `dns` outbound: A/AAAA through the
 * built-in DoH client (a zone of its own, such as the egress probe's, may have its own DoH server), routed to the
 * upstream; other query types over TCP, chained through the upstream by `proxySettings` (without it they are
 * dialled directly, a leak the spike measured).
 */
export function tunnelConfig(parts: TunnelParts): V2rayConfig {
  const { dns } = parts;
  assertDohUrl(dns.dohUrl);
  for (const zone of dns.zones ?? []) {
    assertDohUrl(zone.dohUrl);
    if (!/^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/.test(zone.zone)) throw new TypeError(`not a DNS zone: ${zone.zone}`);
  }
  assertIpLiteral('dns.tcpResolver.address', dns.tcpResolver.address);
  assertPort('dns.tcpResolver.port', dns.tcpResolver.port);
  assertIpLiteral('dnsListen.address', parts.dnsListen.address);
  assertPort('dnsListen.port', parts.dnsListen.port);
  const { config, serverIp } = parts.upstream;
  const upstream = toV2rayOutbound(
    config,
    serverIp,
    PROXY_TAG,
    parts.mark === undefined ? {} : { mark: parts.mark },
  );
  const resolver = { address: dns.tcpResolver.address, port: dns.tcpResolver.port };
  return {
    dns: {
      // v2ray asks a zone's own server first for names in it, and the rest in this order, taking the first
      // server's answer even when it has no address: the zone's server (authoritative for its zone alone) goes
      // last, or every other name would come back empty.
      servers: [
        dns.dohUrl,
        ...(dns.zones ?? []).map((zone) => ({ address: zone.dohUrl, domains: [`domain:${zone.zone}`] })),
      ],
      tag: DNS_INTERNAL_TAG,
    },
    inbounds: [
      ...parts.inbounds,
      {
        tag: DNS_IN_TAG,
        listen: parts.dnsListen.address,
        port: parts.dnsListen.port,
        protocol: 'dokodemo-door',
        settings: { ...resolver, network: 'tcp,udp' },
      },
    ],
    outbounds: [
      upstream,
      {
        tag: DNS_OUT_TAG,
        protocol: 'dns',
        settings: { network: 'tcp', ...resolver },
        proxySettings: { tag: PROXY_TAG },
      },
    ],
    routing: {
      domainStrategy: 'AsIs',
      rules: [
        { type: 'field', inboundTag: [DNS_IN_TAG], outboundTag: DNS_OUT_TAG },
        ...parts.rules,
        { type: 'field', inboundTag: [DNS_INTERNAL_TAG], outboundTag: PROXY_TAG },
      ],
    },
  };
}

/** `https+local://`, `localhost` and plain addresses would query outside the tunnel. */
function assertDohUrl(value: string): void {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new TypeError(`dns.dohUrl is not a URL: ${value}`);
  }
  if (url.protocol !== 'https:') throw new TypeError(`dns.dohUrl must be an https:// URL: ${value}`);
}

export function assertIpLiteral(name: string, value: string): void {
  if (isIP(value) === 0) throw new TypeError(`${name} must be an IP literal: ${value}`);
}

export function assertPort(name: string, value: number): void {
  if (!Number.isInteger(value) || value < 1 || value > 65535) {
    throw new TypeError(`${name} must be a port number: ${value}`);
  }
}
