/**
 * A man in the middle of a plain-HTTP install line replaces ccp and the checksum in the install script together,
 * so the script's own check passes. What closes the gap for the user: the script says first that the download is
 * not protected, and the checksum to compare with comes from the signed-in API, a path this attacker is not on.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { freeLoopbackPort } from '../../src/egress/loopback-ports.js';
import { GATEWAY_NAME, homeWithCurlrc, installCcp } from '../helpers/ccp-install.js';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');
const EVIL = "#!/usr/bin/env node\nconsole.log('9.9.9-evil');\n";

/** Passes requests to the gateway, but serves its own ccp and rewrites the install script's checksum to match. */
async function tamperingProxy(gatewayPort: number): Promise<{ port: number; close: () => void }> {
  const server = http.createServer(async (request, reply) => {
    if (request.url === '/v1/cli/ccp.mjs') return reply.end(EVIL);
    const upstream = await fetch(`http://127.0.0.1:${gatewayPort}${request.url}`);
    const body = (await upstream.text()).replace(
      /^CCP_SHA256='[0-9a-f]{64}'$/m,
      `CCP_SHA256='${sha256(EVIL)}'`,
    );
    reply.writeHead(upstream.status, {
      'content-type': upstream.headers.get('content-type') ?? 'text/plain',
    });
    reply.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as net.AddressInfo).port, close: () => server.close() };
}

describe('attack: ccp and its checksum replaced together on a plain-HTTP install line', () => {
  let t: TestGateway;
  let dir: string;
  let port: number;
  let proxy: Awaited<ReturnType<typeof tamperingProxy>>;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'ccp-install-mitm-'));
    const bundle = path.join(dir, 'ccp.mjs');
    writeFileSync(bundle, "#!/usr/bin/env node\nconsole.log('9.9.9-test');\n");
    port = await freeLoopbackPort();
    t = await startTestGateway('sqlite', {
      CLI_BUNDLE: bundle,
      HTTP_PORT: String(port),
      PUBLIC_HOST: GATEWAY_NAME,
      PUBLIC_API_URL: `http://${GATEWAY_NAME}:${port}`,
    });
    await t.listen();
    proxy = await tamperingProxy(port);
  });
  after(async () => {
    proxy?.close();
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is announced by the script, and told apart by the checksum the signed-in portal shows', async () => {
    const user = await t.createUser('travelling');
    // The user's terminal reaches the gateway's name through the attacker.
    const home = homeWithCurlrc(dir, 'mitm', [
      `connect-to = "${GATEWAY_NAME}:${port}:127.0.0.1:${proxy.port}"`,
    ]);
    const run = await installCcp('sh', home, `http://${GATEWAY_NAME}:${port}`);
    // The script cannot catch it by itself (its checksum came through the same attacker): the limit of plain HTTP.
    assert.equal(run.status, 0, run.stderr);
    assert.equal(readFileSync(path.join(home, '.local/bin/ccp'), 'utf8'), EVIL);
    assert.match(run.stderr, /^ccp install: WARNING: This gateway serves ccp over plain HTTP/);
    const printed = /Its SHA-256 checksum: ([0-9a-f]{64})\n/.exec(run.stdout)?.[1];
    assert.equal(printed, sha256(EVIL));

    const release = await t.request('GET', '/v1/user/cli', { token: user.token });
    assert.equal(release.status, 200);
    assert.notEqual(
      release.body.sha256,
      printed,
      'the portal shows what the gateway serves, not what arrived',
    );
    const served = Buffer.from(await (await fetch(`${t.url}/v1/cli/ccp.mjs`)).arrayBuffer());
    assert.equal(release.body.sha256, sha256(served));
  });
});
