import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { MemoryRuntime } from '../helpers/memory-runtime.js';
import { passingTester } from '../helpers/passing-tester.js';
import { SseClient } from '../helpers/sse-client.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const socks = (exit: string) => ({
  label: `exit ${exit}`,
  ip_address: exit,
  proxy_config: { type: 'socks', server: exit, server_port: 1080, version: '5' },
});

for (const kind of DATABASES) {
  describe(`hosts, bindings and tasks (${kind})`, () => {
    let t: TestGateway;
    let runtime: MemoryRuntime;
    let alice: { id: string; token: string; sshPass: string };
    let bob: { id: string; token: string };
    let exitA: string;
    let exitB: string;

    before(async () => {
      runtime = new MemoryRuntime();
      t = await startTestGateway(
        kind,
        { PUBLIC_HOST: 'gw.example.test', PUBLIC_ENTRY_URL: 'http://gw.example.test' },
        runtime,
        { egressTester: passingTester },
      );
      await t.listen();
      alice = await t.createUser('alice');
      bob = await t.createUser('bob');
      exitA = (await t.request('POST', '/v1/admin/egress-ips', { body: socks('198.51.100.21') })).body.id;
      exitB = (await t.request('POST', '/v1/admin/egress-ips', { body: socks('198.51.100.22') })).body.id;
    });
    after(() => t.close());

    const createHost = async (userId: string, egressIpId?: string) => {
      const response = await t.request('POST', '/v1/admin/hosts', {
        body: { user_id: userId, ...(egressIpId ? { egress_ip_id: egressIpId } : {}) },
      });
      assert.equal(response.status, 201, JSON.stringify(response.body));
      return response.body;
    };
    const settle = () => t.gateway.tasks.idle();
    const task = async (id: string) => (await t.request('GET', `/v1/admin/tasks/${id}`)).body;
    const host = async (id: string) => (await t.request('GET', `/v1/admin/hosts/${id}`)).body;

    it("creates a host with its short ID, access command and the owner's SSH details", async () => {
      const created = await createHost(alice.id);
      assert.match(created.short_id, /^[a-hjkmnp-z2-9]{8}$/);
      assert.equal(created.status, 'created');
      assert.equal(created.username, 'alice');
      assert.equal(
        created.access_command,
        `curl -fsSL http://gw.example.test/entry/${created.short_id} | sh`,
      );
      assert.deepEqual(created.ssh, {
        ssh_user: `alice+${created.short_id}`,
        ssh_pass: alice.sshPass,
        ssh_host: 'gw.example.test',
        ssh_port: t.gateway.ssh.port,
      });
      assert.deepEqual(created.bindings, []);
      const details = await host(created.id);
      assert.equal(details.ssh_user, `alice+${created.short_id}`);
      assert.equal(details.ssh_pass, undefined);
      assert.equal(
        (await t.request('POST', '/v1/admin/hosts', { body: { user_id: randomUUID() } })).status,
        404,
      );
      const badEgress = await t.request('POST', '/v1/admin/hosts', {
        body: { user_id: alice.id, egress_ip_id: randomUUID() },
      });
      assert.equal(badEgress.status, 404);
    });

    it('refuses to start without a binding, binds, and refuses the same pair twice', async () => {
      const created = await createHost(alice.id);
      const refused = await t.request('POST', `/v1/admin/hosts/${created.id}/start`);
      assert.equal(refused.status, 409);
      assert.equal(refused.body.code, 'no_egress_bound');
      const bound = await t.request('POST', '/v1/admin/bindings', {
        body: { host_id: created.id, egress_ip_id: exitA },
      });
      assert.equal(bound.status, 201);
      assert.equal(bound.body.host_id, created.id);
      const twice = await t.request('POST', '/v1/admin/bindings', {
        body: { host_id: created.id, egress_ip_id: exitA },
      });
      assert.equal(twice.status, 409);
      assert.equal(twice.body.code, 'binding_exists');
      assert.equal(
        (
          await t.request('POST', '/v1/admin/bindings', {
            body: { host_id: randomUUID(), egress_ip_id: exitA },
          })
        ).status,
        404,
      );
      const details = await host(created.id);
      assert.deepEqual(
        details.bindings.map((b: any) => [b.egress_ip_id, b.ip_address, b.active]),
        [[exitA, '198.51.100.21', true]],
      );
    });

    it('starts, stops and rebuilds through tasks, one at a time per host, with live SSE', async () => {
      const created = await createHost(alice.id, exitA);
      const adminStream = await SseClient.open(
        `${t.url}/v1/admin/sse?topics=hosts,tasks&token=${t.adminToken}`,
      );
      const aliceStream = await SseClient.open(`${t.url}/v1/user/sse?token=${alice.token}`);
      const bobStream = await SseClient.open(`${t.url}/v1/user/sse?token=${bob.token}`);
      runtime.delayMs = 200;
      const started = await t.request('POST', `/v1/admin/hosts/${created.id}/start`);
      assert.equal(started.status, 202);
      assert.equal(started.body.status_url, `/v1/admin/tasks/${started.body.task_id}`);
      const busy = await t.request('POST', `/v1/admin/hosts/${created.id}/rebuild`);
      assert.equal(busy.status, 409);
      assert.equal(busy.body.code, 'host_busy');
      assert.equal(busy.body.task_id, started.body.task_id);
      await settle();
      runtime.delayMs = 0;
      const done = await task(started.body.task_id);
      assert.equal(done.status, 'succeeded');
      assert.equal(done.kind, 'start');
      assert.equal(done.progress, 100);
      assert.match(done.requested_by, /^admin:/);
      const running = await host(created.id);
      assert.equal(running.status, 'running');
      assert.ok(running.started_at);
      assert.equal(running.image, 'ccp-workspace:memory');
      assert.ok(runtime.calls.includes(`start ${created.id} 198.51.100.21`));

      await aliceStream.waitFor((c) =>
        c.messages().some((m) => m.data.topic === 'hosts' && m.data.payload?.status === 'running'),
      );
      await adminStream.waitFor((c) =>
        c.messages().some((m) => m.data.topic === 'tasks' && m.data.payload?.status === 'succeeded'),
      );
      assert.ok(
        adminStream.messages().some((m) => m.data.topic === 'hosts' && m.data.payload?.status === 'starting'),
      );
      assert.ok(aliceStream.messages().some((m) => m.data.topic === 'tasks' && m.data.action === 'create'));
      assert.ok(
        bobStream.messages().every((m) => m.data.id !== created.id && m.data.payload?.host_id !== created.id),
      );

      const rebuilt = await t.request('POST', `/v1/admin/hosts/${created.id}/rebuild`);
      assert.equal(rebuilt.status, 202);
      await settle();
      assert.equal((await host(created.id)).status, 'running');
      const stopped = await t.request('POST', `/v1/admin/hosts/${created.id}/stop`);
      await settle();
      assert.equal((await task(stopped.body.task_id)).status, 'succeeded');
      assert.equal((await host(created.id)).status, 'stopped');
      await t.request('POST', `/v1/admin/hosts/${created.id}/rebuild`);
      await settle();
      assert.equal(
        (await host(created.id)).status,
        'stopped',
        'a stopped host stays stopped after a rebuild',
      );
      for (const stream of [adminStream, aliceStream, bobStream]) stream.close();
    });

    it('fails the task and the host with a precise code when the runtime fails', async () => {
      const created = await createHost(alice.id, exitA);
      runtime.failNextStart = 'exit_ip_mismatch';
      const started = await t.request('POST', `/v1/admin/hosts/${created.id}/start`);
      await settle();
      const failed = await task(started.body.task_id);
      assert.equal(failed.status, 'failed');
      assert.equal(failed.error.code, 'exit_ip_mismatch');
      const details = await host(created.id);
      assert.equal(details.status, 'failed');
      assert.match(details.last_error, /exit_ip_mismatch/);
      const events = await t.request('GET', `/v1/admin/events?host_id=${created.id}&type=host.failed`);
      assert.equal(events.body.total, 1);
    });

    it("fails a task with the domain's own code, not internal, when a rule refuses it mid-way", async () => {
      const created = await createHost(alice.id, exitA);
      await t.request('POST', `/v1/admin/hosts/${created.id}/start`);
      await settle();
      // The binding vanishes behind the API's back (another replica, a hand edit): the rebuild finds none.
      await t.gateway.repositories.hosts.deleteBinding((await host(created.id)).bindings[0].id);
      const rebuild = await t.request('POST', `/v1/admin/hosts/${created.id}/rebuild`);
      assert.equal(rebuild.status, 202);
      await settle();
      const failed = await task(rebuild.body.task_id);
      assert.equal(failed.status, 'failed');
      assert.deepEqual(failed.error, { code: 'no_egress_bound', message: 'The host has no egress IP bound' });
      const events = await t.request(
        'GET',
        `/v1/admin/events?host_id=${created.id}&type=task.rebuild.failed`,
      );
      assert.equal(events.body.events[0].data.code, 'no_egress_bound');
    });

    it('switches upstreams in place and protects the last binding of a running host', async () => {
      const created = await createHost(alice.id, exitA);
      await t.request('POST', `/v1/admin/hosts/${created.id}/start`);
      await settle();
      const details = await host(created.id);
      const onlyBinding = details.bindings[0].id;
      const refused = await t.request('DELETE', `/v1/admin/bindings/${onlyBinding}`);
      assert.equal(refused.status, 409);
      assert.equal(refused.body.code, 'no_egress_bound');
      await t.request('POST', '/v1/admin/bindings', { body: { host_id: created.id, egress_ip_id: exitB } });
      const standby = await host(created.id);
      assert.deepEqual(
        standby.bindings.map((b: any) => b.active),
        [true, false],
      );
      assert.equal((await t.request('DELETE', `/v1/admin/bindings/${onlyBinding}`)).status, 204);
      assert.ok(runtime.calls.includes(`switch ${created.id} 198.51.100.22`));
      assert.equal((await t.request('DELETE', `/v1/admin/bindings/${randomUUID()}`)).status, 404);

      await t.request('PUT', `/v1/admin/egress-ips/${exitB}`, {
        body: { proxy_config: { type: 'socks', server: '198.51.100.22', server_port: 1081, version: '5' } },
      });
      assert.equal(runtime.hosts.get(created.id)?.upstream?.config.server_port, 1081);
    });

    it('shows users only their own hosts and lets them rebuild them', async () => {
      const own = await createHost(alice.id, exitA);
      const others = await createHost(bob.id, exitA);
      const list = await t.request('GET', '/v1/user/hosts', { token: alice.token });
      assert.ok(list.body.hosts.every((h: any) => h.user_id === alice.id));
      assert.ok(list.body.hosts.some((h: any) => h.id === own.id));
      const mine = await t.request('GET', `/v1/user/hosts/${own.id}`, { token: alice.token });
      assert.equal(mine.status, 200);
      assert.equal(
        mine.body.vnc_url,
        `http://gw.example.test:0/v1/user/hosts/${own.id}/vnc/vnc.html?autoconnect=true&resize=scale&path=v1/user/hosts/${own.id}/vnc/websockify`.replace(
          ':0',
          `:${t.gateway.config.httpPort}`,
        ),
      );
      assert.equal(
        (await t.request('GET', `/v1/user/hosts/${others.id}`, { token: alice.token })).status,
        404,
      );
      assert.equal(
        (await t.request('POST', `/v1/user/hosts/${others.id}/rebuild`, { token: alice.token })).status,
        404,
      );
      const rebuild = await t.request('POST', `/v1/user/hosts/${own.id}/rebuild`, { token: alice.token });
      assert.equal(rebuild.status, 202);
      assert.equal(rebuild.body.status_url, `/v1/user/tasks/${rebuild.body.task_id}`);
      await settle();
      const status = await t.request('GET', rebuild.body.status_url, { token: alice.token });
      assert.equal(status.body.status, 'succeeded');
      assert.equal((await t.request('GET', rebuild.body.status_url, { token: bob.token })).status, 404);
      assert.equal((await t.request('GET', '/v1/user/hosts', { token: t.adminToken })).status, 403);
    });

    it('lets owners start and stop their own hosts under the same rules as an admin', async () => {
      const own = await createHost(alice.id);
      const others = await createHost(bob.id, exitA);
      const as = (token: string, action: string, id: string) =>
        t.request('POST', `/v1/user/hosts/${id}/${action}`, { token });
      for (const action of ['start', 'stop']) {
        assert.equal((await as(alice.token, action, others.id)).status, 404, `${action} of another's host`);
        assert.equal((await as(alice.token, action, randomUUID())).status, 404);
      }
      const unbound = await as(alice.token, 'start', own.id);
      assert.equal(unbound.status, 409);
      assert.equal(unbound.body.code, 'no_egress_bound');
      await t.request('POST', '/v1/admin/bindings', { body: { host_id: own.id, egress_ip_id: exitA } });

      runtime.delayMs = 200;
      const started = await as(alice.token, 'start', own.id);
      assert.equal(started.status, 202, JSON.stringify(started.body));
      assert.equal(started.body.status_url, `/v1/user/tasks/${started.body.task_id}`);
      const busy = await as(alice.token, 'rebuild', own.id);
      assert.equal(busy.status, 409);
      assert.equal(busy.body.code, 'host_busy');
      await settle();
      runtime.delayMs = 0;
      const startTask = (await t.request('GET', started.body.status_url, { token: alice.token })).body;
      assert.equal(startTask.status, 'succeeded');
      assert.equal(startTask.kind, 'start');
      assert.equal(startTask.requested_by, `user:alice`);
      assert.equal((await host(own.id)).status, 'running');

      const stopped = await as(alice.token, 'stop', own.id);
      assert.equal(stopped.status, 202);
      await settle();
      assert.equal(
        (await t.request('GET', stopped.body.status_url, { token: alice.token })).body.status,
        'succeeded',
      );
      assert.equal((await host(own.id)).status, 'stopped');
      assert.equal((await host(others.id)).status, 'created', "the other user's host was never touched");
      assert.equal((await as(t.adminToken, 'start', own.id)).status, 403);
    });

    it("sends each stream its own role's view of a host: what GET of that portal returns", async () => {
      const created = await createHost(alice.id);
      const aliceStream = await SseClient.open(`${t.url}/v1/user/sse?topics=hosts&token=${alice.token}`);
      const adminStream = await SseClient.open(`${t.url}/v1/admin/sse?topics=hosts&token=${t.adminToken}`);
      const lastUpdate = (stream: SseClient, status: string) =>
        stream
          .messages()
          .filter((m) => m.data.id === created.id && m.data.action === 'update')
          .findLast((m) => m.data.payload.status === status)?.data.payload;
      const viewsMatch = async (status: string) => {
        for (const stream of [aliceStream, adminStream])
          await stream.waitFor(() => lastUpdate(stream, status) !== undefined);
        const mine = await t.request('GET', `/v1/user/hosts/${created.id}`, { token: alice.token });
        assert.deepEqual(lastUpdate(aliceStream, status), mine.body);
        assert.match(mine.body.vnc_url, /\/v1\/user\/hosts\//);
        assert.deepEqual(lastUpdate(adminStream, status), await host(created.id));
      };
      // A binding (the hosts service) and a start (the lifecycle) each send an update.
      await t.request('POST', '/v1/admin/bindings', { body: { host_id: created.id, egress_ip_id: exitA } });
      await viewsMatch('created');
      await t.request('POST', `/v1/user/hosts/${created.id}/start`, { token: alice.token });
      await settle();
      await viewsMatch('running');
      aliceStream.close();
      adminStream.close();
    });

    it('reports the managed images and announces each check on image-status', async () => {
      const stream = await SseClient.open(`${t.url}/v1/admin/sse?topics=image-status&token=${t.adminToken}`);
      const images = await t.request('GET', '/v1/admin/images');
      assert.equal(images.status, 200);
      assert.deepEqual(
        images.body.images.map((i: any) => [i.name, i.tag, i.present]),
        [['workspace', 'ccp-workspace:memory', true]],
      );
      await stream.waitFor((c) => c.messages().some((m) => m.data.topic === 'image-status'));
      assert.deepEqual(stream.messages().at(-1)?.data.payload.images, images.body.images);
      stream.close();
      const ready = await t.request('GET', '/v1/admin/events?type=image.ready');
      assert.equal(ready.body.total, 1, 'an unchanged status is logged once');
    });

    it('builds the images as a task on no host, one build at a time, and announces the new state', async () => {
      runtime.imagePresent = false;
      let finish!: () => void;
      runtime.imageBuild = new Promise((resolve) => {
        finish = resolve;
      });
      const stream = await SseClient.open(`${t.url}/v1/admin/sse?topics=image-status&token=${t.adminToken}`);
      // Whatever fails, the build ends: the gateway's close waits for its task.
      try {
        const build = await t.request('POST', '/v1/admin/images/build', { body: { rebuild: true } });
        assert.equal(build.status, 202, JSON.stringify(build.body));
        const task = async () => (await t.request('GET', `/v1/admin/tasks/${build.body.task_id}`)).body;
        const again = await t.request('POST', '/v1/admin/images/build');
        assert.equal(again.status, 409);
        assert.equal(again.body.code, 'images_busy');
        assert.equal(again.body.task_id, build.body.task_id);
        // The build's own steps are the task's stage while it runs.
        while ((await task()).stage !== 'docker build ccp-workspace:memory')
          await new Promise((resolve) => setTimeout(resolve, 10));
        assert.ok(runtime.calls.includes('buildImages rebuild'));
        finish();
        await settle();
        const done = await task();
        assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
        assert.equal(done.kind, 'image-build');
        assert.equal(done.host_id, null);
        assert.equal(done.message, 'images ready: ccp-workspace:memory');
        await stream.waitFor((c) =>
          c.messages().some((m) => m.data.topic === 'image-status' && m.data.payload.images[0].present),
        );
        stream.close();
        const wrong = await t.request('POST', '/v1/admin/images/build', { body: { rebuild: 'yes' } });
        assert.equal(wrong.status, 400);
      } finally {
        finish();
      }
    });

    it('lists tasks newest first with filters', async () => {
      const all = await t.request('GET', '/v1/admin/tasks');
      assert.equal(all.status, 200);
      // As times: a whole second prints without `.000`, so the text alone does not sort.
      const times = all.body.tasks.map((x: any) => Date.parse(x.created_at));
      assert.deepEqual(
        times,
        [...times].sort((a, b) => b - a),
      );
      const failed = await t.request('GET', '/v1/admin/tasks?status=failed');
      assert.ok(failed.body.tasks.length >= 1 && failed.body.tasks.every((x: any) => x.status === 'failed'));
      const one = await t.request('GET', '/v1/admin/tasks?limit=1');
      assert.equal(one.body.tasks.length, 1);
      for (const query of ['?limit=0', '?limit=501', '?status=done', '?host_id=nope']) {
        assert.equal((await t.request('GET', `/v1/admin/tasks${query}`)).status, 400, query);
      }
    });

    it('stops the hosts of a disabled user and removes those of a deleted user', async () => {
      const carol = await t.createUser('carol');
      const created = await createHost(carol.id, exitA);
      await t.request('POST', `/v1/admin/hosts/${created.id}/start`);
      await settle();
      await t.request('PATCH', `/v1/admin/users/${carol.id}`, { body: { status: 'disabled' } });
      await settle();
      assert.equal((await host(created.id)).status, 'stopped');
      assert.equal(await runtime.state(created.id), 'stopped');
      assert.equal((await t.request('DELETE', `/v1/admin/users/${carol.id}`)).status, 204);
      assert.equal(await runtime.state(created.id), 'missing');
      assert.equal((await t.request('GET', `/v1/admin/hosts/${created.id}`)).status, 404);
    });

    it('deletes a host with everything the engine held', async () => {
      const created = await createHost(alice.id, exitA);
      await t.request('POST', `/v1/admin/hosts/${created.id}/start`);
      await settle();
      const stream = await SseClient.open(`${t.url}/v1/admin/sse?topics=hosts&token=${t.adminToken}`);
      assert.equal((await t.request('DELETE', `/v1/admin/hosts/${created.id}`)).status, 204);
      assert.equal(await runtime.state(created.id), 'missing');
      await stream.waitFor((c) =>
        c.messages().some((m) => m.data.action === 'delete' && m.data.id === created.id),
      );
      stream.close();
      assert.equal((await t.request('DELETE', `/v1/admin/hosts/${created.id}`)).status, 404);
    });

    it('fails interrupted tasks and reconciles hosts against the engine at start-up', async () => {
      const created = await createHost(alice.id, exitA);
      await t.request('POST', `/v1/admin/hosts/${created.id}/start`);
      await settle();
      const now = new Date().toISOString();
      const leftover = randomUUID();
      await t.gateway.database.db
        .insertInto('tasks')
        .values({
          id: leftover,
          kind: 'start',
          host_id: created.id,
          user_id: alice.id,
          status: 'running',
          progress: 40,
          stage: 'x',
          message: '',
          error_code: null,
          error_message: null,
          requested_by: 'system',
          created_at: now,
          started_at: now,
          finished_at: null,
        })
        .execute();
      runtime.hosts.delete(created.id);
      await t.gateway.lifecycle.reconcile(t.gateway.access.system('test: reconcile'), 'local');
      const interrupted = await task(leftover);
      assert.equal(interrupted.status, 'failed');
      assert.equal(interrupted.error.code, 'interrupted');
      const details = await host(created.id);
      assert.equal(details.status, 'failed');
      assert.match(details.last_error, /missing/);
    });
  });
}
