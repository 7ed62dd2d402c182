import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { ProxyConfig } from '@ccp/api';
import { needs } from '../../../../test/support/needs.js';
import { freeLoopbackPort, waitUntilListening } from '../../src/egress/loopback-ports.js';
import { v2rayEngine } from '../../src/egress/v2ray-engine.js';
import { locateV2ray, type V2rayBinary } from './v2ray-binary.js';
import { DNS, VARIANTS } from './variants.js';

const LOOPBACK = '127.0.0.1';

/** The matching v2ray server inbound for an upstream, so the translated client has something real to talk to. */
function serverInbound(config: ProxyConfig, port: number): Record<string, unknown> {
  const base = { listen: LOOPBACK, port };
  switch (config.type) {
    case 'socks':
      return config.username
        ? { ...base, protocol: 'socks', settings: { auth: 'password', accounts: [credentials(config)] } }
        : { ...base, protocol: 'socks', settings: { auth: 'noauth' } };
    case 'http':
      return {
        ...base,
        protocol: 'http',
        settings: config.username ? { accounts: [credentials(config)] } : {},
      };
    case 'shadowsocks':
      return {
        ...base,
        protocol: 'shadowsocks',
        settings: { method: config.method, password: config.password },
      };
    case 'vmess':
      return {
        ...base,
        protocol: 'vmess',
        settings: { clients: [{ id: config.uuid, alterId: 0 }] },
        ...(config.transport
          ? { streamSettings: { network: 'ws', wsSettings: { path: config.transport.path } } }
          : {}),
      };
    case 'vless':
      return { ...base, protocol: 'vless', settings: { clients: [{ id: config.uuid }], decryption: 'none' } };
    case 'trojan':
      throw new Error('trojan needs TLS, which this loopback test does not set up');
  }
}

function credentials(config: { username?: string; password?: string }) {
  return { user: config.username, pass: config.password };
}

function startV2ray(binary: string, config: string): ChildProcess {
  const child = spawn(binary, v2rayEngine.runArgs, { stdio: ['pipe', 'ignore', 'ignore'] });
  child.stdin?.end(config);
  return child;
}

/**
 * Ends a v2ray started here: SIGTERM starts its graceful close, which can hang (seen on a loaded machine, where
 * the file then never ended), so SIGKILL follows after 3 s.
 */
async function stopV2ray(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const kill = setTimeout(() => child.kill('SIGKILL'), 3_000);
  await exited;
  clearTimeout(kill);
}

/** v2ray takes a few milliseconds to listen; poll instead of sleeping. */
async function waitForPort(port: number): Promise<void> {
  assert.ok(
    await waitUntilListening(port, Date.now() + 5000, { host: LOOPBACK }),
    `nothing listens on ${port}`,
  );
}

/** A plain HTTP proxy request to the probe inbound. */
function getThroughProxy(proxyPort: number, target: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.get(
      { host: LOOPBACK, port: proxyPort, path: target, headers: { connection: 'close' }, timeout: 5000 },
      (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk) => {
          body += chunk;
        });
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
      },
    );
    request.on('timeout', () => request.destroy(new Error('timeout')));
    request.on('error', reject);
  });
}

describe('traffic crosses a real v2ray client and server on loopback', { skip: needs('v2ray') }, () => {
  let binary: V2rayBinary;
  let target: http.Server;
  let targetUrl = '';

  before(async () => {
    binary = await locateV2ray();
    target = http.createServer((_request, response) => {
      response.setHeader('content-type', 'text/plain');
      response.end('through the tunnel');
    });
    target.listen(0, LOOPBACK);
    await once(target, 'listening');
    targetUrl = `http://${LOOPBACK}:${(target.address() as AddressInfo).port}/ip`;
  });

  after(async () => {
    target?.close();
    await binary?.dispose();
  });

  // TLS variants need a certificate and key for the server side; v2ray -test covers their configs.
  const plain = VARIANTS.filter(({ upstream: { config } }) => !('tls' in config && config.tls?.enabled));
  for (const { name, upstream } of plain) {
    it(name, async () => {
      const [serverPort, probePort, dnsPort] = [
        await freeLoopbackPort(),
        await freeLoopbackPort(),
        await freeLoopbackPort(),
      ];
      const config = { ...upstream.config, server_port: serverPort };
      const server = startV2ray(
        binary.path,
        JSON.stringify({
          inbounds: [serverInbound(config, serverPort)],
          outbounds: [{ protocol: 'freedom' }],
        }),
      );
      const client = startV2ray(
        binary.path,
        v2rayEngine.renderTestConfig({
          upstream: { config, serverIp: LOOPBACK },
          probeInbound: { protocol: 'http', port: probePort },
          dnsPort,
          dns: DNS,
        }),
      );
      try {
        await waitForPort(serverPort);
        await waitForPort(probePort);
        const response = await getThroughProxy(probePort, targetUrl);
        assert.equal(response.status, 200);
        // The client config has no direct outbound: this answer can only have come through the server.
        assert.equal(response.body, 'through the tunnel');
      } finally {
        await Promise.all([stopV2ray(server), stopV2ray(client)]);
      }
    });
  }
});
