import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { passingTester } from '../helpers/passing-tester.js';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

// A container engine that takes each connection and drops it before answering, as an overloaded or restarting
// dockerd does ("socket hang up"), then one that is not there at all: either way the API answers 503
// runtime_unavailable with what to do, not a bare 500.
describe('the API when the container engine does not answer', () => {
  let t: TestGateway;
  let dir: string;
  let engine: net.Server;
  let dropped = 0;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'ccp-engine-'));
    const socket = path.join(dir, 'docker.sock');
    engine = net.createServer((connection) => {
      dropped++;
      connection.destroy();
    });
    await new Promise<void>((resolve) => engine.listen(socket, resolve));
    t = await startTestGateway('sqlite', { DOCKER_SOCKET: socket }, 'docker', {
      egressTester: passingTester,
    });
  });

  after(async () => {
    await t?.close();
    await new Promise((resolve) => engine?.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });

  const assertEngineUnavailable = (response: { status: number; body: any }) => {
    assert.equal(response.status, 503, JSON.stringify(response.body));
    assert.equal(response.body.code, 'runtime_unavailable');
    assert.match(response.body.error, /container engine/);
  };

  it('answers 503 runtime_unavailable when the engine hangs up: the images and a host deletion', async () => {
    assertEngineUnavailable(await t.request('GET', '/v1/admin/images'));
    const user = await t.createUser('hangup');
    const egressIpId = await t.createEgressIp('192.0.2.77');
    const created = await t.request('POST', '/v1/admin/hosts', {
      body: { user_id: user.id, egress_ip_id: egressIpId },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const deleted = await t.request('DELETE', `/v1/admin/hosts/${created.body.id}`);
    assertEngineUnavailable(deleted);
    assert.match(deleted.body.error, /try again/);
    assert.ok(dropped > 0, 'the gateway asked the engine');
    // Nothing was lost: the host is still there to delete once the engine answers.
    assert.equal((await t.request('GET', `/v1/admin/hosts/${created.body.id}`)).status, 200);
  });

  it('answers 503 runtime_unavailable when nothing listens on the socket', async () => {
    await new Promise((resolve) => engine.close(resolve));
    assertEngineUnavailable(await t.request('GET', '/v1/admin/images'));
  });
});
