import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { type ProxyConfig, SHADOWSOCKS_METHODS } from '@ccp/api';
import type {
  GatewayConfigParams,
  ResolvedUpstream,
  TestConfigParams,
} from '../../src/egress/tunnel-engine.js';

export const UUID = 'b831381d-6324-4d53-ad4f-8cda48b30811';
export const EXIT_IP = '198.51.100.21';

/** Self-signed, CN and SAN exit1.example.test; only ever parsed, never served. */
export const CA_PEM = `-----BEGIN CERTIFICATE-----
MIIBrzCCAVSgAwIBAgIUZWXfOh6neGHsr7a1PHjFM8D38vMwCgYIKoZIzj0EAwIw
HTEbMBkGA1UEAwwSZXhpdDEuZXhhbXBsZS50ZXN0MB4XDTI2MTEyMTIxNDgwNloX
DTM2MTExODIxNDgwNlowHTEbMBkGA1UEAwwSZXhpdDEuZXhhbXBsZS50ZXN0MFkw
EwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAERcwG4PeVlH7W6In6tup91Enl1buLmXSI
od4ZY7gL3Vt3ADmMslB1+5VMdLz1lZECAubjT9+FSqivzt1+VWTOxaNyMHAwHQYD
VR0OBBYEFBroeJcc9cQY/LkNtW7CEbn06HCJMB8GA1UdIwQYMBaAFBroeJcc9cQY
/LkNtW7CEbn06HCJMA8GA1UdEwEB/wQFMAMBAf8wHQYDVR0RBBYwFIISZXhpdDEu
ZXhhbXBsZS50ZXN0MAoGCCqGSM49BAMCA0kAMEYCIQC8qbNhAc7SuG2Wegt7i1vO
AuJQn9DVV7XNEyoMnTBxagIhAOs61G6kFlgerh6oXnnSACoHJlnRx49cpWg0jSLp
qE98
-----END CERTIFICATE-----
`;

export interface Variant {
  name: string;
  upstream: ResolvedUpstream;
}

const variant = (name: string, config: ProxyConfig): Variant => ({
  name,
  upstream: { config, serverIp: EXIT_IP },
});

/** One upstream per protocol variant the tunnel engine supports; every one must render and pass `v2ray -test`. */
export const VARIANTS: Variant[] = [
  variant('socks', { type: 'socks', server: EXIT_IP, server_port: 1082 }),
  variant('socks-auth', {
    type: 'socks',
    server: 'exit1.example.test',
    server_port: 1080,
    version: '5',
    username: 'u1',
    password: 'p1',
  }),
  variant('http', { type: 'http', server: EXIT_IP, server_port: 8080 }),
  variant('http-auth', { type: 'http', server: EXIT_IP, server_port: 3128, username: 'u1', password: 'p1' }),
  variant('http-tls', {
    type: 'http',
    server: 'exit1.example.test',
    server_port: 443,
    username: 'u1',
    password: 'p1',
    tls: { enabled: true },
  }),
  ...SHADOWSOCKS_METHODS.map((method) =>
    variant(`shadowsocks-${method}`, {
      type: 'shadowsocks',
      server: EXIT_IP,
      server_port: 8388,
      method,
      password: 'sspass',
    }),
  ),
  variant('vmess', {
    type: 'vmess',
    server: EXIT_IP,
    server_port: 10086,
    uuid: UUID,
    security: 'auto',
    alter_id: 0,
  }),
  variant('vmess-tls', {
    type: 'vmess',
    server: 'exit1.example.test',
    server_port: 10443,
    uuid: UUID,
    security: 'aes-128-gcm',
    tls: { enabled: true, server_name: 'exit1.example.test', alpn: ['http/1.1'] },
  }),
  variant('vmess-ws', {
    type: 'vmess',
    server: 'exit1.example.test',
    server_port: 80,
    uuid: UUID,
    security: 'zero',
    transport: { type: 'ws', path: '/vm' },
  }),
  variant('vmess-ws-tls', {
    type: 'vmess',
    server: 'exit1.example.test',
    server_port: 10445,
    uuid: UUID,
    alter_id: 0,
    tls: { enabled: true, server_name: 'exit1.example.test', insecure: false, certificate: CA_PEM },
    transport: { type: 'ws', path: '/vm', headers: { Host: 'cdn.example.test' } },
  }),
  variant('vless', { type: 'vless', server: EXIT_IP, server_port: 10087, uuid: UUID }),
  variant('vless-tls', {
    type: 'vless',
    server: EXIT_IP,
    server_port: 10443,
    uuid: UUID,
    tls: { enabled: true, server_name: 'exit1.example.test', insecure: true },
  }),
  variant('vless-ws', {
    type: 'vless',
    server: 'exit1.example.test',
    server_port: 443,
    uuid: UUID,
    tls: { enabled: true },
    transport: { type: 'ws', path: '/vl', headers: { Host: 'exit1.example.test' } },
  }),
  variant('trojan', {
    type: 'trojan',
    server: 'exit1.example.test',
    server_port: 443,
    password: 'trpass',
    tls: { enabled: true, server_name: 'exit1.example.test', certificate: CA_PEM.trim().split('\n') },
  }),
];

export const DNS = {
  dohUrl: 'https://203.0.113.10/dns-query',
  tcpResolver: { address: '203.0.113.10', port: 53 },
};

export function gatewayParams(upstream: ResolvedUpstream): GatewayConfigParams {
  return {
    upstream,
    socketMark: 0xff,
    transparentPort: 12345,
    dnsListen: { address: '192.0.2.9', port: 53 },
    dns: DNS,
    sniffing: true,
    countersPort: 10085,
  };
}

export function testParams(upstream: ResolvedUpstream, protocol: 'socks' | 'http'): TestConfigParams {
  return { upstream, probeInbound: { protocol, port: 20801 }, dnsPort: 20853, dns: DNS };
}

const goldenDir = new URL('./golden/', import.meta.url);

/** Compares with golden/<name>; `UPDATE_GOLDEN=1` rewrites the file instead. */
export async function assertGolden(name: string, actual: string): Promise<void> {
  const file = new URL(name, goldenDir);
  if (process.env.UPDATE_GOLDEN === '1') {
    await writeFile(file, actual);
    return;
  }
  const expected = await readFile(file, 'utf8').catch(() => {
    throw new Error(`golden/${name} is missing; run the tests with UPDATE_GOLDEN=1 to create it`);
  });
  assert.equal(actual, expected, `rendered output differs from golden/${name} (UPDATE_GOLDEN=1 rewrites it)`);
}

export { goldenDir };
