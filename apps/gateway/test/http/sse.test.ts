import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SseClient } from '../helpers/sse-client.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

for (const kind of DATABASES) {
  describe(`SSE streams (${kind})`, () => {
    let t: TestGateway;
    let alice: { id: string; token: string };
    let bob: { id: string; token: string };
    const open: SseClient[] = [];
    const connect = async (path: string, headers: Record<string, string> = {}) => {
      const client = await SseClient.open(`${t.url}${path}`, headers);
      open.push(client);
      return client;
    };

    before(async () => {
      t = await startTestGateway(kind, { SSE_HEARTBEAT_SECONDS: '1' });
      await t.listen();
      alice = await t.createUser('alice');
      bob = await t.createUser('bob');
    });
    after(async () => {
      for (const client of open) client.close();
      await t.close();
    });

    it('sends event: message frames with ids and JSON data to the admin stream', async () => {
      const client = await connect('/v1/admin/sse?topics=hosts,image-status', {
        authorization: `Bearer ${t.adminToken}`,
      });
      assert.equal(client.status, 200);
      t.gateway.sse.publish(
        { topic: 'hosts', action: 'create', id: 'h1', payload: { status: 'created' } },
        alice.id,
      );
      t.gateway.sse.publish({ topic: 'tasks', action: 'update', id: 't1' }, alice.id);
      t.gateway.sse.publish({ topic: 'image-status', action: 'update' }, null);
      await client.waitFor((c) => c.messages().length >= 2);
      const frames = client.frames.filter((f) => f.data);
      assert.ok(frames.every((f) => f.event === 'message' && /^\d+$/.test(f.id ?? '')));
      assert.deepEqual(
        client.messages().map((m) => m.data),
        [
          { topic: 'hosts', action: 'create', id: 'h1', payload: { status: 'created' } },
          { topic: 'image-status', action: 'update' },
        ],
      );
    });

    it('accepts the token as ?token= and sends heartbeats', async () => {
      const client = await connect(`/v1/admin/sse?token=${t.adminToken}`);
      assert.equal(client.status, 200);
      await client.waitFor((c) => c.frames.some((f) => f.comment === 'heartbeat'), 3000);
    });

    it('refuses missing, wrong-role and bad tokens and unknown topics', async () => {
      assert.equal((await connect('/v1/admin/sse')).status, 401);
      assert.equal((await connect(`/v1/admin/sse?token=${alice.token}`)).status, 403);
      assert.equal((await connect(`/v1/user/sse?token=${t.adminToken}`)).status, 403);
      assert.equal((await connect('/v1/admin/sse?token=not-a-token')).status, 401);
      const unknown = await connect(`/v1/admin/sse?topics=hosts,nope&token=${t.adminToken}`);
      assert.equal(unknown.status, 400);
      assert.equal(JSON.parse(unknown.body).code, 'validation_failed');
      const adminOnly = await connect(`/v1/user/sse?topics=image-status&token=${alice.token}`);
      assert.equal(adminOnly.status, 400);
    });

    it('gives a user only their own hosts and tasks', async () => {
      const aliceStream = await connect(`/v1/user/sse?token=${alice.token}`);
      const bobStream = await connect(`/v1/user/sse?topics=hosts&token=${bob.token}`);
      t.gateway.sse.publish({ topic: 'hosts', action: 'update', id: 'alice-host' }, alice.id);
      t.gateway.sse.publish({ topic: 'tasks', action: 'update', id: 'alice-task' }, alice.id);
      t.gateway.sse.publish({ topic: 'hosts', action: 'update', id: 'bob-host' }, bob.id);
      t.gateway.sse.publish({ topic: 'tasks', action: 'update', id: 'bob-task' }, bob.id);
      t.gateway.sse.publish({ topic: 'image-status', action: 'update' }, null);
      await aliceStream.waitFor((c) => c.messages().length >= 2);
      await bobStream.waitFor((c) => c.messages().length >= 1);
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.deepEqual(
        aliceStream.messages().map((m) => m.data.id),
        ['alice-host', 'alice-task'],
      );
      assert.deepEqual(
        bobStream.messages().map((m) => m.data.id),
        ['bob-host'],
      );
    });

    it('resumes from Last-Event-ID', async () => {
      const first = await connect(`/v1/admin/sse?topics=tasks&token=${t.adminToken}`);
      for (const id of ['r1', 'r2', 'r3'])
        t.gateway.sse.publish({ topic: 'tasks', action: 'update', id }, null);
      await first.waitFor((c) => c.messages().length >= 3);
      const [m1] = first.messages();
      first.close();
      const resumed = await connect(`/v1/admin/sse?topics=tasks&token=${t.adminToken}`, {
        'last-event-id': m1!.id!,
      });
      await resumed.waitFor((c) => c.messages().length >= 2);
      assert.deepEqual(
        resumed.messages().map((m) => m.data.id),
        ['r2', 'r3'],
      );
    });

    it("closes a user's streams when the user is disabled", async () => {
      const carol = await t.createUser('carol');
      const stream = await connect(`/v1/user/sse?token=${carol.token}`);
      const patched = await t.request('PATCH', `/v1/admin/users/${carol.id}`, {
        body: { status: 'disabled' },
      });
      assert.equal(patched.status, 200);
      await stream.waitFor((c) => c.ended);
    });

    it('ends open streams on shutdown', async () => {
      const other = await startTestGateway(kind);
      await other.listen();
      const stream = await SseClient.open(`${other.url}/v1/admin/sse?token=${other.adminToken}`);
      assert.equal(stream.status, 200);
      const started = Date.now();
      await other.close();
      await stream.waitFor((c) => c.ended);
      assert.ok(Date.now() - started < 5000);
    });
  });
}
