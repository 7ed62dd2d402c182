/**
 * The egress meter's figures in the API: what the runtime counted goes to the host, its owner and the egress IP
 * that carried it (the one before a switch for bytes counted before it), users see only their own, and the
 * window is checked. The real counters are tested through the lab in test/egress/egress-meter.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MemoryRuntime } from '../helpers/memory-runtime.js';
import { passingTester } from '../helpers/passing-tester.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

for (const kind of DATABASES) {
  describe(`egress traffic figures (${kind})`, () => {
    let t: TestGateway;
    const runtime = new MemoryRuntime();

    before(async () => {
      t = await startTestGateway(kind, { EGRESS_METER_SECONDS: '0' }, runtime, {
        egressTester: passingTester,
      });
      await t.listen();
    });
    after(() => t.close());

    it('sums per host, egress IP and user; bytes from before a switch stay with the egress IP that carried them', async () => {
      const alice = await t.createUser('traffic-alice');
      const bob = await t.createUser('traffic-bob');
      const first = await t.createEgressIp('198.51.100.71', 'first');
      const second = await t.createEgressIp('198.51.100.72', 'second');
      const aliceHost = await t.createHost(alice.id, second);
      const bobHost = await t.createHost(bob.id, second);
      // Past 2^32, which a 32-bit column would not hold.
      const big = 5 * 2 ** 32;
      runtime.egressTraffic.set(aliceHost.id, [
        { egressIpId: null, sent: 1000, received: big },
        { egressIpId: first, sent: 10, received: 20 },
      ]);
      runtime.egressTraffic.set(bobHost.id, [{ egressIpId: null, sent: 5, received: 7 }]);
      await t.gateway.egressMeter.sample();
      runtime.egressTraffic.set(aliceHost.id, [{ egressIpId: null, sent: 1, received: 1 }]);
      await t.gateway.egressMeter.sample();
      // Taken once: a sample with nothing new adds nothing.
      await t.gateway.egressMeter.sample();

      const totals = (await t.request('GET', '/v1/admin/egress-traffic')).body;
      const of = (rows: Record<string, string | number>[], key: string, id: string) =>
        rows.find((row) => row[key] === id);
      assert.deepEqual(of(totals.hosts, 'host_id', aliceHost.id), {
        host_id: aliceHost.id,
        sent_bytes: 1011,
        received_bytes: big + 21,
      });
      assert.deepEqual(of(totals.egress_ips, 'egress_ip_id', first), {
        egress_ip_id: first,
        sent_bytes: 10,
        received_bytes: 20,
      });
      assert.deepEqual(of(totals.egress_ips, 'egress_ip_id', second), {
        egress_ip_id: second,
        sent_bytes: 1006,
        received_bytes: big + 8,
      });
      assert.equal(of(totals.users, 'user_id', bob.id)?.received_bytes, 7);

      const hours = (await t.request('GET', `/v1/admin/egress-traffic/hours?host_id=${aliceHost.id}`)).body;
      assert.equal(hours.hours.length, 2, 'one row per hour and egress IP');
      assert.match(hours.hours[0].hour, /T\d\d:00:00Z$/);

      const own = await t.request('GET', '/v1/user/egress-traffic', { token: bob.token });
      assert.equal(own.status, 200);
      assert.deepEqual(
        own.body.hosts.map((row: { host_id: string }) => row.host_id),
        [bobHost.id],
      );
      assert.deepEqual(
        own.body.users.map((row: { user_id: string }) => row.user_id),
        [bob.id],
      );

      const metrics = (await t.request('GET', '/metrics')).body as string;
      assert.ok(
        metrics.includes(`ccp_host_egress_bytes_total{host_id="${aliceHost.id}",direction="sent"} 1011`),
        metrics,
      );
    });

    it('refuses a window that ends before it starts, and a user reading the admin figures', async () => {
      const backwards = await t.request(
        'GET',
        '/v1/admin/egress-traffic?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z',
      );
      assert.equal(backwards.status, 400);
      assert.match(JSON.stringify(backwards.body), /before/);
      const user = await t.createUser('traffic-carol');
      assert.equal((await t.request('GET', '/v1/admin/egress-traffic', { token: user.token })).status, 403);
    });
  });
}
