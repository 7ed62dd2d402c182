import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

for (const kind of DATABASES) {
  describe(`event log (${kind})`, () => {
    let t: TestGateway;
    let alice: { id: string };
    const hostId = '6f1f7c38-0d6a-4c55-9a3f-2f7a1b0c9d11';
    let middle = '';

    before(async () => {
      t = await startTestGateway(kind);
      alice = await t.createUser('alice');
      await new Promise((resolve) => setTimeout(resolve, 5));
      middle = new Date().toISOString();
      await new Promise((resolve) => setTimeout(resolve, 5));
      const actor = { kind: 'system' as const, id: null, username: null };
      for (let i = 0; i < 3; i++) {
        await t.gateway.bus.emit({
          type: 'host.upstream_switched',
          data: { egress_ip_id: 'e1' },
          message: `start ${i}`,
          actor,
          userId: alice.id,
          hostId,
        });
      }
    });
    after(() => t.close());

    const events = (query: string) => t.request('GET', `/v1/admin/events${query}`);

    it('lists newest first with total, limit and offset', async () => {
      const all = await events('');
      assert.equal(all.status, 200);
      assert.equal(all.body.limit, 50);
      assert.equal(all.body.offset, 0);
      assert.equal(all.body.total, all.body.events.length);
      const times = all.body.events.map((e: any) => e.created_at);
      assert.deepEqual(times, [...times].sort().reverse());
      assert.deepEqual(
        all.body.events.slice(0, 3).map((e: any) => e.message),
        ['start 2', 'start 1', 'start 0'],
      );
      const page = await events('?limit=2&offset=1');
      assert.deepEqual(
        page.body.events.map((e: any) => e.id),
        all.body.events.slice(1, 3).map((e: any) => e.id),
      );
      assert.equal(page.body.total, all.body.total);
    });

    it('filters by user, host, type, since and until together', async () => {
      const byHost = await events(`?host_id=${hostId}&type=host.upstream_switched&user_id=${alice.id}`);
      assert.equal(byHost.body.total, 3);
      assert.ok(byHost.body.events.every((e: any) => e.host_id === hostId && e.user_id === alice.id));
      const since = await events(`?since=${encodeURIComponent(middle)}&type=host.upstream_switched`);
      assert.equal(since.body.total, 3);
      const until = await events(`?until=${encodeURIComponent(middle)}&user_id=${alice.id}`);
      assert.ok(until.body.events.every((e: any) => e.created_at <= middle));
      assert.ok(until.body.events.some((e: any) => e.type === 'user.created'));
      const exact = byHost.body.events[0].created_at;
      const inclusive = await events(`?since=${exact}&until=${exact}&host_id=${hostId}`);
      assert.ok(inclusive.body.events.some((e: any) => e.created_at === exact));
      const offset = await events(
        `?since=${encodeURIComponent(middle.replace('Z', '+00:00'))}&type=host.upstream_switched`,
      );
      assert.equal(offset.body.total, 3);
    });

    it('rejects bad filter values with 400', async () => {
      for (const query of [
        '?limit=0',
        '?limit=501',
        '?limit=abc',
        '?offset=-1',
        '?since=yesterday',
        '?user_id=nope',
      ]) {
        const response = await events(query);
        assert.equal(response.status, 400, query);
        assert.equal(response.body.code, 'validation_failed', query);
      }
      const reversed = await events('?since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z');
      assert.equal(reversed.status, 400);
    });

    it('is admin only', async () => {
      const user = await t.createUser('bob');
      assert.equal((await t.request('GET', '/v1/admin/events', { token: user.token })).status, 403);
      assert.equal((await t.request('GET', '/v1/admin/events', { token: null })).status, 401);
    });

    it('reports dashboard statistics', async () => {
      const stats = await t.request('GET', '/v1/admin/dashboard/stats');
      assert.equal(stats.status, 200);
      assert.equal(stats.body.users.total, 3);
      assert.equal(stats.body.users.active, 3);
      await t.request('PATCH', `/v1/admin/users/${alice.id}`, { body: { status: 'disabled' } });
      const after = await t.request('GET', '/v1/admin/dashboard/stats');
      assert.equal(after.body.users.disabled, 1);
      assert.equal(after.body.users.active, 2);
      assert.deepEqual(after.body.hosts, { total: 0, running: 0, stopped: 0, failed: 0 });
      assert.deepEqual(after.body.sessions, { ssh: 0, vnc: 0 });
    });

    it('keeps the milliseconds of an event made on a whole second (times sort as text)', async (ctx) => {
      const onTheSecond = '2030-01-02T03:04:05.000Z';
      ctx.mock.timers.enable({ apis: ['Date'], now: Date.parse(onTheSecond) });
      try {
        await t.gateway.bus.emit({
          type: 'host.upstream_switched',
          data: { egress_ip_id: 'e1' },
          message: 'on the second',
          actor: { kind: 'system', id: null, username: null },
        });
      } finally {
        ctx.mock.timers.reset();
      }
      const found = await events(`?since=${onTheSecond}&until=${onTheSecond}`);
      assert.deepEqual(
        found.body.events.map((e: any) => [e.message, e.created_at]),
        [['on the second', onTheSecond]],
      );
    });
  });
}
