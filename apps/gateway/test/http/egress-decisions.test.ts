/**
 * What egress policies blocked, in the API, on both databases: rounds add to a minute's counts, the cap on
 * destinations a minute holds across rounds and what passes it is summed as uncounted, the owner reads their
 * host and nobody else's, retention takes old minutes. The log itself is read through the lab in
 * test/egress/egress-decisions.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { DecisionCount } from '../../src/egress/tunnel-engine.js';
import { MemoryRuntime } from '../helpers/memory-runtime.js';
import { passingTester } from '../helpers/passing-tester.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const CAP = 3;
const POLICY = {
  mode: 'log-only',
  default_action: 'allow',
  rules: [{ action: 'deny', domain: '*.example.test' }],
};

for (const kind of DATABASES) {
  describe(`egress policy decisions (${kind})`, () => {
    let t: TestGateway;
    const runtime = new MemoryRuntime();

    before(async () => {
      t = await startTestGateway(
        kind,
        {
          EGRESS_POLICY_LOG_SECONDS: '0',
          EGRESS_POLICY_LOG_DESTINATIONS: String(CAP),
          EGRESS_POLICY: JSON.stringify(POLICY),
        },
        runtime,
        { egressTester: passingTester },
      );
      await t.listen();
    });
    after(() => t.close());

    const minute = new Date(Math.floor(Date.now() / 60_000) * 60_000).toISOString();
    const seen = (seconds: number) => new Date(Date.parse(minute) + seconds * 1000).toISOString();
    const count = (destination: string, port: number, n: number, at: number): DecisionCount => ({
      minute,
      decision: 'would_block',
      destination,
      port,
      count: n,
      lastSeen: seen(at),
    });

    it('adds rounds up per minute, keeps the cap across them, and reports what went uncounted', async () => {
      const alice = await t.createUser('decisions-alice');
      const bob = await t.createUser('decisions-bob');
      const egressIp = await t.createEgressIp('198.51.100.81');
      const host = await t.createHost(alice.id, egressIp);
      runtime.egressDecisions.set(host.id, {
        counts: [count('a.test', 443, 2, 10), count('b.test', 80, 1, 5)],
        refused: 0,
        overflowed: false,
      });
      await t.gateway.egressDecisionLog.read();
      runtime.egressDecisions.set(host.id, {
        // a.test again (counted, last seen later); c.test fills the cap; d.test and e.test pass it.
        counts: [
          count('a.test', 443, 3, 8),
          count('c.test', 443, 1, 20),
          count('d.test', 443, 4, 21),
          count('e.test', 443, 1, 22),
        ],
        refused: 2,
        overflowed: true,
      });
      await t.gateway.egressDecisionLog.read();
      // Taken once: a round with nothing new adds nothing and says nothing.
      await t.gateway.egressDecisionLog.read();

      const read = (await t.request('GET', `/v1/admin/hosts/${host.id}/egress-decisions`)).body;
      const rows = Object.fromEntries(
        read.destinations.map((row: { destination: string; count: number; last_seen: string }) => [
          row.destination,
          [row.count, new Date(row.last_seen).toISOString()],
        ]),
      );
      assert.deepEqual(rows, {
        'a.test': [5, seen(10)],
        'b.test': [1, seen(5)],
        'c.test': [1, seen(20)],
      });
      assert.deepEqual(read.uncounted, [{ minute: minute.replace('.000Z', 'Z'), destinations: 2, count: 5 }]);
      assert.deepEqual(read.allow_list.rules, [
        { action: 'allow', domain: 'a.test', port: '443' },
        { action: 'allow', domain: 'b.test', port: '80' },
        { action: 'allow', domain: 'c.test', port: '443' },
      ]);
      assert.deepEqual(read.allow_list.policy, {
        mode: 'enforce',
        default_action: 'allow',
        rules: [...read.allow_list.rules, ...POLICY.rules],
      });

      const own = await t.request('GET', `/v1/user/hosts/${host.id}/egress-decisions`, {
        token: alice.token,
      });
      assert.equal(own.status, 200);
      assert.deepEqual(own.body.destinations, read.destinations);
      const other = await t.request('GET', `/v1/user/hosts/${host.id}/egress-decisions`, {
        token: bob.token,
      });
      assert.equal(other.status, 404, 'another user does not see the host');

      const events = (
        await t.request('GET', `/v1/admin/events?type=host.egress_decisions&host_id=${host.id}`)
      ).body.events;
      assert.equal(events.length, 2, 'one event a round that found something');
      const capped = events.find((event: { data: { uncounted: number } }) => event.data.uncounted > 0);
      assert.equal(capped.level, 'warn');
      assert.deepEqual(capped.data, {
        blocked: 0,
        would_block: 9,
        destinations: 4,
        uncounted: 5,
        refused_lines: 2,
        log_full: true,
      });
      assert.match(capped.message, /5 to 2 more destinations uncounted past 3 a minute; the log was full/);

      const metrics = (await t.request('GET', '/metrics')).body as string;
      assert.match(metrics, /ccp_egress_policy_decisions_total\{decision="would_block"\} 7\n/);

      const future = await t.request(
        'GET',
        `/v1/admin/hosts/${host.id}/egress-decisions?from=2999-01-01T00:00:00Z`,
      );
      assert.deepEqual(future.body.destinations, []);
      // Retention: a window of no days takes everything older than now.
      await t.gateway.repositories.egressDecisions.deleteOlderThan(
        new Date(Date.now() + 120_000).toISOString(),
      );
      const pruned = (await t.request('GET', `/v1/admin/hosts/${host.id}/egress-decisions`)).body;
      assert.deepEqual([pruned.destinations, pruned.uncounted], [[], []]);
    });

    it('refuses a window that is not a time', async () => {
      const res = await t.request(
        'GET',
        '/v1/admin/hosts/00000000-0000-4000-8000-000000000000/egress-decisions?from=yesterday',
      );
      assert.equal(res.status, 400);
    });
  });
}
