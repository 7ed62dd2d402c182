import { isIP } from 'node:net';
import type { OutboundTls, ProxyConfig, WsTransport } from '@ccp/api';
import type { ResolvedUpstream, UpstreamEndpoint } from './tunnel-engine.js';

export interface V2rayTlsSettings {
  serverName: string;
  allowInsecure: boolean;
  alpn?: string[];
  certificates?: { usage: 'verify'; certificate: string[] }[];
}

export interface V2rayStreamSettings {
  network?: 'tcp' | 'ws';
  security?: 'none' | 'tls';
  tlsSettings?: V2rayTlsSettings;
  wsSettings?: { path: string; headers?: Record<string, string> };
  sockopt?: { mark?: number; tproxy?: 'tproxy' | 'redirect' };
}

export interface V2rayOutbound {
  tag: string;
  protocol: string;
  settings: Record<string, unknown>;
  streamSettings?: V2rayStreamSettings;
  proxySettings?: { tag: string };
}

export interface OutboundOptions {
  /** SO_MARK for the upstream socket; needs CAP_NET_ADMIN, so the control plane's test leaves it out. */
  mark?: number;
}

/**
 * Translates a validated upstream into a v2ray 4.34 outbound. `resolvedServerIp` replaces the host name (v2ray
 * would otherwise resolve it through itself); the name stays as the TLS server name and WebSocket Host.
 */
export function toV2rayOutbound(
  config: ProxyConfig,
  resolvedServerIp: string,
  tag: string,
  options: OutboundOptions = {},
): V2rayOutbound {
  if (isIP(resolvedServerIp) === 0) throw new TypeError(`not an IP literal: ${resolvedServerIp}`);
  const server = { address: resolvedServerIp, port: config.server_port };
  const outbound = (
    protocol: string,
    settings: Record<string, unknown>,
    tls?: OutboundTls,
    ws?: WsTransport,
  ) => ({
    tag,
    protocol,
    settings,
    streamSettings: streamSettings(config.server, tls, ws, options.mark),
  });
  switch (config.type) {
    case 'socks':
    case 'http': {
      const { username, password } = config;
      const users =
        username !== undefined && password !== undefined ? [{ user: username, pass: password }] : undefined;
      return outbound(
        config.type,
        { servers: [{ ...server, ...(users ? { users } : {}) }] },
        config.type === 'http' ? httpProxyTls(config.tls) : undefined,
      );
    }
    case 'shadowsocks': {
      // sing-box's name for the IETF ChaCha20 AEAD; v2ray 4.34 calls it chacha20-poly1305.
      const method = config.method === 'chacha20-ietf-poly1305' ? 'chacha20-poly1305' : config.method;
      return outbound('shadowsocks', { servers: [{ ...server, method, password: config.password }] });
    }
    case 'vmess': {
      // alterId 0 selects the AEAD header; sing-box `zero` (no cipher) is closest to v2ray `none`.
      const security = config.security === 'zero' ? 'none' : (config.security ?? 'auto');
      const user = { id: config.uuid, alterId: config.alter_id ?? 0, security };
      return outbound('vmess', { vnext: [{ ...server, users: [user] }] }, config.tls, config.transport);
    }
    case 'vless': {
      const user = { id: config.uuid, encryption: 'none' };
      return outbound('vless', { vnext: [{ ...server, users: [user] }] }, config.tls, config.transport);
    }
    case 'trojan':
      return outbound(
        'trojan',
        { servers: [{ ...server, password: config.password }] },
        config.tls,
        config.transport,
      );
  }
}

function streamSettings(
  serverName: string,
  tls: OutboundTls | undefined,
  ws: WsTransport | undefined,
  mark: number | undefined,
): V2rayStreamSettings {
  const secure = tls?.enabled === true;
  const settings: V2rayStreamSettings = { network: ws ? 'ws' : 'tcp', security: secure ? 'tls' : 'none' };
  if (secure) settings.tlsSettings = tlsSettings(tls, serverName);
  if (ws) {
    const headers = { ...ws.headers };
    const hasHost = Object.keys(headers).some((name) => name.toLowerCase() === 'host');
    // Without a Host header v2ray would send the IP literal it dials; sing-box sends the name.
    const hostName = secure && tls.server_name !== undefined ? tls.server_name : serverName;
    if (!hasHost && isIP(hostName) === 0) headers.Host = hostName;
    settings.wsSettings = { path: ws.path ?? '/', ...(Object.keys(headers).length > 0 ? { headers } : {}) };
  }
  if (mark !== undefined) settings.sockopt = { mark };
  return settings;
}

/** An HTTPS proxy speaks HTTP/1.1 CONNECT: v2ray would otherwise offer h2 and tunnel with HTTP/2 CONNECT,
 * which most HTTP proxies (v2ray's own inbound among them) cannot answer. */
function httpProxyTls(tls: OutboundTls | undefined): OutboundTls | undefined {
  return tls?.enabled === true && tls.alpn === undefined ? { ...tls, alpn: ['http/1.1'] } : tls;
}

function tlsSettings(tls: OutboundTls, serverName: string): V2rayTlsSettings {
  const settings: V2rayTlsSettings = {
    serverName: tls.server_name ?? serverName,
    allowInsecure: tls.insecure === true,
  };
  if (tls.alpn !== undefined) settings.alpn = tls.alpn;
  if (tls.certificate !== undefined) {
    const pem = Array.isArray(tls.certificate) ? tls.certificate.join('\n') : tls.certificate;
    settings.certificates = [{ usage: 'verify', certificate: pem.trim().split(/\r?\n/) }];
  }
  return settings;
}

/**
 * Where v2ray's upstream traffic goes. Shadowsocks sends UDP to the server port itself; a SOCKS5 server names
 * its UDP relay, and only a relay on the server port gets through the kill switch. Every other protocol carries
 * UDP inside its TCP stream.
 */
export function v2rayUpstreamEndpoint(upstream: ResolvedUpstream): UpstreamEndpoint {
  const { config, serverIp } = upstream;
  const udp = config.type === 'shadowsocks' || config.type === 'socks';
  return { address: serverIp, port: config.server_port, protocols: udp ? ['tcp', 'udp'] : ['tcp'] };
}
