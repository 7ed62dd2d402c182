/**
 * Egress budgets in the API, on both databases: set, read with this month's use, removed; the gateway's default
 * for hosts without their own; bad input named; the round's decisions (warned once, throttle at the limit and
 * lifted when raised, the strictest reached budget wins) against a MemoryRuntime. The real throttle, stop and
 * warnings are tested through the lab in test/egress/egress-budgets.test.ts.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { MemoryRuntime } from '../helpers/memory-runtime.js';
import { passingTester } from '../helpers/passing-tester.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

for (const kind of DATABASES) {
  describe(`egress budgets (${kind})`, () => {
    let t: TestGateway;
    const runtime = new MemoryRuntime();

    before(async () => {
      t = await startTestGateway(
        kind,
        {
          EGRESS_METER_SECONDS: '0',
          EGRESS_BUDGET_HOST_BYTES: String(1 << 30),
          EGRESS_BUDGET_ACTION: 'notify',
        },
        runtime,
        { egressTester: passingTester },
      );
      await t.listen();
    });
    after(() => t.close());

    /** Bytes the meter's next sample records for the host. */
    const move = async (hostId: string, received: number) => {
      runtime.egressTraffic.set(hostId, [{ egressIpId: null, sent: 0, received }]);
      await t.gateway.egressMeter.sample();
      await t.gateway.egressBudgetRound.round();
    };
    const events = async (hostId: string, type: string) =>
      (await t.request('GET', `/v1/admin/events?host_id=${hostId}&type=${type}`)).body.events;

    it('sets, reads and removes budgets; a host without its own has the gateway default', async () => {
      const user = await t.createUser('budget-api');
      const egressIpId = await t.createEgressIp('198.51.100.81');
      const host = await t.createHost(user.id, egressIpId);

      const listed = (await t.request('GET', '/v1/admin/egress-budgets')).body.budgets;
      const fallback = listed.find((b: { subject_id: string }) => b.subject_id === host.id);
      assert.equal(fallback.global_default, true);
      assert.equal(fallback.limit_bytes, 1 << 30);
      assert.equal(fallback.warning_percent, 80);

      const set = await t.request('PUT', `/v1/admin/egress-budgets/egress_ip/${egressIpId}`, {
        body: { limit_bytes: 4096, action: 'throttle' },
      });
      assert.equal(set.status, 200, JSON.stringify(set.body));
      assert.deepEqual(
        { ...set.body, month: undefined },
        {
          scope: 'egress_ip',
          subject_id: egressIpId,
          limit_bytes: 4096,
          warning_percent: 80,
          action: 'throttle',
          throttle_bytes_per_second: 131072,
          global_default: false,
          month: undefined,
          used_bytes: 0,
          state: 'under',
          warned_at: null,
          reached_at: null,
        },
      );
      assert.match(set.body.month, /^\d{4}-\d\d$/);
      const removed = await t.request('DELETE', `/v1/admin/egress-budgets/egress_ip/${egressIpId}`);
      assert.equal(removed.status, 204);
      assert.equal((await t.request('GET', `/v1/admin/egress-budgets/egress_ip/${egressIpId}`)).status, 404);
    });

    it('names bad input and unknown subjects', async () => {
      const unknown = await t.request('PUT', `/v1/admin/egress-budgets/user/${randomUUID()}`, {
        body: { limit_bytes: 1024, action: 'stop' },
      });
      assert.equal(unknown.status, 404);
      assert.match(unknown.body.error, /user not found/);
      const user = await t.createUser('budget-bad');
      const bad = await t.request('PUT', `/v1/admin/egress-budgets/user/${user.id}`, {
        body: { limit_bytes: 0, action: 'pause' },
      });
      assert.equal(bad.status, 400);
      assert.equal(bad.body.code, 'validation_failed', JSON.stringify(bad.body));
      const scope = await t.request('PUT', `/v1/admin/egress-budgets/team/${user.id}`, {
        body: { limit_bytes: 1024, action: 'stop' },
      });
      // A path naming no resource is unknown (decisions.md: a malformed path is a 404).
      assert.equal(scope.status, 404);
    });

    it('warns once at the share, throttles at the limit with the strictest rate, and lifts when raised', async () => {
      const user = await t.createUser('budget-round');
      const egressIpId = await t.createEgressIp('198.51.100.82');
      const host = await t.createHost(user.id, egressIpId);
      await t.request('PUT', `/v1/admin/egress-budgets/host/${host.id}`, {
        body: {
          limit_bytes: 10_000,
          warning_percent: 50,
          action: 'throttle',
          throttle_bytes_per_second: 8192,
        },
      });
      await t.request('PUT', `/v1/admin/egress-budgets/user/${user.id}`, {
        body: { limit_bytes: 10_000, action: 'throttle', throttle_bytes_per_second: 4096 },
      });

      await move(host.id, 6000);
      assert.equal((await events(host.id, 'host.egress_budget_warning')).length, 1);
      await move(host.id, 100);
      assert.equal((await events(host.id, 'host.egress_budget_warning')).length, 1, 'told once a month');
      assert.equal(runtime.throttles.get(host.id), undefined);

      await move(host.id, 4000);
      assert.equal(runtime.throttles.get(host.id), 4096, "the owner's stricter rate");
      const view = (await t.request('GET', `/v1/admin/hosts/${host.id}`)).body;
      assert.equal(view.egress.throttle_bytes_per_second, 4096);
      assert.equal(view.egress.budget.state, 'reached');

      await t.request('PUT', `/v1/admin/egress-budgets/user/${user.id}`, {
        body: { limit_bytes: 1_000_000, action: 'throttle', throttle_bytes_per_second: 4096 },
      });
      assert.equal(runtime.throttles.get(host.id), 8192, "the host's own budget is still reached");
      await t.request('DELETE', `/v1/admin/egress-budgets/host/${host.id}`);
      assert.equal(runtime.throttles.get(host.id), undefined, 'lifted: the gateway default is far off');
      assert.equal(
        (await t.request('GET', `/v1/admin/hosts/${host.id}`)).body.egress.throttle_bytes_per_second,
        null,
      );
    });
  });
}
