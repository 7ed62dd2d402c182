import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const exec = promisify(execFile);
const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));

// Entry auth through an HTTP proxy named by the environment, and around it for NO_PROXY hosts.
describe('API calls honour HTTP(S)_PROXY and NO_PROXY', () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-cli-http-proxy-'));
  const seen: string[] = [];
  let proxy: Server;
  let proxyUrl: string;
  let gatewayAddress = '';

  before(async () => {
    // A forward proxy that answers every request itself, as a gateway refusing the password would.
    const refuse: Parameters<typeof createServer>[1] = (request, response) => {
      seen.push(`${request.method} ${request.url}`);
      response.writeHead(401, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: 'Invalid username or password', code: 'invalid_credentials' }));
    };
    const gateway = createServer(refuse);
    proxy = createServer(refuse);
    proxy.on('connect', (request, socket) => {
      seen.push(`CONNECT ${request.url}`);
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      gateway.emit('connection', socket);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    mkdirSync(path.join(work, 'ccp'));
    // Nothing listens at this gateway address; only the proxy can answer for it.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    gatewayAddress = `127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise((resolve) => closed.close(resolve));
    writeFileSync(
      path.join(work, 'ccp', 'config.yaml'),
      `gateway: http://${gatewayAddress}\nshort_id: k3m9x2qa\n`,
    );
  });

  after(() => {
    proxy.close();
    rmSync(work, { recursive: true, force: true });
  });

  const ccp = (env: Record<string, string>) =>
    exec('npx', ['tsx', '--conditions=source', MAIN, 'sessions'], {
      env: { PATH: process.env.PATH, HOME: work, XDG_CONFIG_HOME: work, CCP_PASSWORD: 'x', ...env },
    }).then(
      () => ({ code: 0, stderr: '' }),
      (error) => ({ code: error.code as number, stderr: error.stderr as string }),
    );

  it('goes through the proxy, and around it for NO_PROXY', async () => {
    const proxied = await ccp({ HTTP_PROXY: proxyUrl });
    assert.equal(proxied.code, 1, proxied.stderr);
    assert.deepEqual(seen, [`CONNECT ${gatewayAddress}`, 'POST /v1/entry/k3m9x2qa/auth']);
    const bypassed = await ccp({ HTTP_PROXY: proxyUrl, NO_PROXY: '127.0.0.1' });
    assert.equal(bypassed.code, 2, bypassed.stderr);
    assert.match(bypassed.stderr, /cannot reach the gateway/);
    assert.equal(seen.length, 2);
  });
});
