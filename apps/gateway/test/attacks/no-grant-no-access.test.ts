import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { sshWithPassword } from '../helpers/openssh.js';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/**
 * Every way in refuses a caller who holds no grant for the host (issue 27, point 1): Bob, a user with a host of his
 * own, tries Alice's host through the user portal, the desktop, the task API, the entry link and SSH; an admin
 * tries a host that does not exist. Each is refused, and none tells Bob that Alice's host exists.
 */
describe('attack: a host without a grant for it', () => {
  let t: TestGateway;
  let alice: Awaited<ReturnType<TestGateway['createUser']>>;
  let bob: Awaited<ReturnType<TestGateway['createUser']>>;
  let aliceHost: { id: string; short_id: string };
  let aliceTask: string;

  before(async () => {
    t = await startTestGateway('sqlite');
    await t.listen();
    alice = await t.createUser('alice');
    bob = await t.createUser('bob');
    const egress = await t.createEgressIp('198.51.100.21');
    aliceHost = await t.createHost(alice.id, egress, { start: false });
    await t.createHost(bob.id, egress, { start: false });
    const started = await t.request('POST', `/v1/user/hosts/${aliceHost.id}/start`, { token: alice.token });
    assert.equal(started.status, 202, JSON.stringify(started.body));
    aliceTask = started.body.task_id;
    await t.gateway.tasks.idle();
  });
  after(() => t?.close());

  it("the user portal: Bob's token reaches nothing of Alice's host, as if it did not exist", async () => {
    const as = (method: string, path: string) => t.request(method, path, { token: bob.token });
    const attempts: [string, string][] = [
      ['GET', `/v1/user/hosts/${aliceHost.id}`],
      ['POST', `/v1/user/hosts/${aliceHost.id}/start`],
      ['POST', `/v1/user/hosts/${aliceHost.id}/stop`],
      ['POST', `/v1/user/hosts/${aliceHost.id}/rebuild`],
      ['GET', `/v1/user/hosts/${aliceHost.id}/vnc/status`],
      ['POST', `/v1/user/hosts/${aliceHost.id}/vnc/start`],
      ['POST', `/v1/user/hosts/${aliceHost.id}/vnc/ticket`],
      ['GET', `/v1/user/tasks/${aliceTask}`],
    ];
    for (const [method, path] of attempts) {
      const mine = await as(method, path);
      const none = await as(
        method,
        path.replace(aliceHost.id, randomUUID()).replace(aliceTask, randomUUID()),
      );
      assert.equal(mine.status, 404, `${method} ${path}: ${JSON.stringify(mine.body)}`);
      assert.deepEqual(mine.body, none.body, `${method} ${path} answers like a host that does not exist`);
    }
    // Alice's own token still works: the refusals are Bob's, not the routes'.
    assert.equal((await t.request('GET', `/v1/user/tasks/${aliceTask}`, { token: alice.token })).status, 200);
  });

  it('the admin portal: a host or task that does not exist is 404 on every route', async () => {
    const missing = randomUUID();
    for (const [method, path] of [
      ['GET', `/v1/admin/hosts/${missing}`],
      ['POST', `/v1/admin/hosts/${missing}/start`],
      ['POST', `/v1/admin/hosts/${missing}/stop`],
      ['POST', `/v1/admin/hosts/${missing}/rebuild`],
      ['DELETE', `/v1/admin/hosts/${missing}`],
      ['GET', `/v1/admin/hosts/${missing}/vnc/status`],
      ['GET', `/v1/admin/tasks/${missing}`],
    ] as const) {
      const answer = await t.request(method, path);
      assert.equal(answer.status, 404, `${method} ${path}: ${JSON.stringify(answer.body)}`);
    }
    const bind = await t.request('POST', '/v1/admin/bindings', {
      body: { host_id: missing, egress_ip_id: randomUUID() },
    });
    assert.equal(bind.status, 404, JSON.stringify(bind.body));
  });

  it("the entry link: Bob's password opens nothing behind Alice's short link", async () => {
    for (const action of ['auth', 'check']) {
      const answer = await t.request('POST', `/v1/entry/${aliceHost.short_id}/${action}`, {
        token: null,
        body: { password: bob.password },
        remoteAddress: '192.0.2.77',
      });
      assert.equal(answer.status, 401, `${action}: ${JSON.stringify(answer.body)}`);
    }
  });

  it("SSH: Bob naming Alice's host is told he has no such host", async () => {
    const refused = await sshWithPassword(t.gateway.ssh.port, bob.password, [
      `bob+${aliceHost.short_id}@127.0.0.1`,
      'true',
    ]);
    assert.equal(refused.code, 255, refused.stderr);
    assert.ok(refused.stderr.includes(`bob has no host ${aliceHost.short_id}.`), refused.stderr);
  });
});
