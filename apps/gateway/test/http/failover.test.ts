import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { EgressTestResult, ProxyConfig } from '@ccp/api';
import pino from 'pino';
import type { EgressTester } from '../../src/domain/egress/egress-ips-service.js';
import { createGateway } from '../../src/gateway.js';
import { MemoryRuntime } from '../helpers/memory-runtime.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/** Declares upstreams healthy or failed by exit address, so failover can be driven step by step. */
class ScriptedTester implements EgressTester {
  readonly failing = new Set<string>();
  /** Declared exit -> the address the echoes see instead. */
  readonly drifted = new Map<string, string>();
  async test(_config: ProxyConfig, declaredIp: string): Promise<EgressTestResult> {
    const observed = this.drifted.get(declaredIp);
    if (observed) {
      const error = `sees the traffic from ${observed}, not the declared ${declaredIp}`;
      return result(false, {
        connectivity: { ok: true, latency_ms: 1, error: null },
        exit_ip: { ok: false, expected: declaredIp, observed, error },
        dns_leak: { ok: true, resolver_ip: declaredIp, error: null },
      });
    }
    const ok = !this.failing.has(declaredIp);
    const error = ok ? null : 'timeout';
    return result(ok, {
      connectivity: { ok, latency_ms: ok ? 1 : null, error },
      exit_ip: { ok, expected: declaredIp, observed: ok ? declaredIp : null, error },
      dns_leak: { ok, resolver_ip: ok ? declaredIp : null, error },
    });
  }
}

function result(ok: boolean, checks: EgressTestResult['checks']): EgressTestResult {
  return { ok, tested_at: new Date().toISOString(), duration_ms: 1, checks };
}

for (const kind of DATABASES) {
  describe(`standby failover (${kind})`, () => {
    let t: TestGateway;
    const runtime = new MemoryRuntime();
    const tester = new ScriptedTester();
    before(async () => {
      t = await startTestGateway(kind, {}, runtime, { egressTester: tester });
    });
    after(() => t.close());

    const egress = async (exit: string) =>
      (
        await t.request('POST', '/v1/admin/egress-ips', {
          body: {
            label: exit,
            ip_address: exit,
            proxy_config: { type: 'socks', server: exit, server_port: 1080 },
          },
        })
      ).body.id as string;

    /** A running host of a new user, bound to an upstream at `primaryExit` and a standby at `standbyExit`. */
    const runningWithStandby = async (primaryExit: string, standbyExit: string, username: string) => {
      const primary = await egress(primaryExit);
      const standby = await egress(standbyExit);
      const user = await t.createUser(username);
      const host = (
        await t.request('POST', '/v1/admin/hosts', { body: { user_id: user.id, egress_ip_id: primary } })
      ).body;
      await t.request('POST', '/v1/admin/bindings', { body: { host_id: host.id, egress_ip_id: standby } });
      await t.request('POST', `/v1/admin/hosts/${host.id}/start`);
      await t.gateway.tasks.idle();
      return { host, primary, standby };
    };

    it('moves a running host to its healthy standby when the active upstream fails, and back', async () => {
      const { host, primary, standby } = await runningWithStandby('198.51.100.21', '198.51.100.37', 'gina');
      assert.equal(runtime.hosts.get(host.id)?.upstream?.exitIp, '198.51.100.21');

      await t.gateway.lifecycle.checkUpstreams(t.gateway.access.system('test: health round'));
      assert.equal(runtime.hosts.get(host.id)?.upstream?.exitIp, '198.51.100.21', 'healthy: no switch');

      tester.failing.add('198.51.100.21');
      await t.gateway.lifecycle.checkUpstreams(t.gateway.access.system('test: health round'));
      assert.equal(runtime.hosts.get(host.id)?.upstream?.exitIp, '198.51.100.37');
      const details = (await t.request('GET', `/v1/admin/hosts/${host.id}`)).body;
      assert.deepEqual(
        details.bindings.map((b: any) => [b.egress_ip_id, b.active]),
        [
          [primary, false],
          [standby, true],
        ],
      );
      const failover = await t.request('GET', `/v1/admin/events?host_id=${host.id}&type=host.failover`);
      assert.equal(failover.body.total, 1);
      assert.equal(failover.body.events[0].data.to_egress_ip_id, standby);

      tester.failing.clear();
      await t.gateway.lifecycle.checkUpstreams(t.gateway.access.system('test: health round'));
      assert.equal(
        runtime.hosts.get(host.id)?.upstream?.exitIp,
        '198.51.100.21',
        'the primary takes over again',
      );
    });

    it('fails over a host started before the gateway restarted (the new process never switched it)', async () => {
      const { host } = await runningWithStandby('198.51.100.61', '198.51.100.62', 'ines');
      // A second process on the same database and engine: what the gateway is after a kill -9 and a start.
      const restarted = await createGateway(t.gateway.config, {
        logger: pino({ level: 'silent' }),
        httpLogger: false,
        runtime,
        egressTester: tester,
      });
      try {
        tester.failing.add('198.51.100.61');
        await restarted.lifecycle.checkUpstreams(restarted.access.system('test: health round'));
        assert.equal(runtime.hosts.get(host.id)?.upstream?.exitIp, '198.51.100.62');
        tester.failing.clear();
        await restarted.lifecycle.checkUpstreams(restarted.access.system('test: health round'));
        assert.equal(runtime.hosts.get(host.id)?.upstream?.exitIp, '198.51.100.61', 'and back');
      } finally {
        tester.failing.clear();
        await restarted.close();
      }
    });

    it('logs the health round only when a result changes: failed, recovered, a new exit address', async () => {
      const exit = '198.51.100.53';
      const id = await egress(exit);
      const host = (
        await t.request('POST', '/v1/admin/hosts', {
          body: { user_id: (await t.createUser('hugo')).id, egress_ip_id: id },
        })
      ).body;
      await t.request('POST', `/v1/admin/hosts/${host.id}/start`);
      await t.gateway.tasks.idle();
      const logged = async () =>
        (await t.request('GET', '/v1/admin/events?limit=500')).body.events
          .filter((e: any) => e.type.startsWith('egress_ip.') && e.data.egress_ip_id === id)
          .map((e: any) => e.type)
          .reverse();

      const round = async (times: number) => {
        for (let n = 0; n < times; n++)
          await t.gateway.lifecycle.checkUpstreams(t.gateway.access.system('test: health round'));
      };
      await round(3);
      assert.deepEqual(await logged(), ['egress_ip.created'], 'passes are not logged');
      const stored = (await t.request('GET', `/v1/admin/egress-ips/${id}`)).body;
      assert.equal(stored.last_test.ok, true, 'the last result stays visible on the egress IP');

      tester.failing.add(exit);
      await round(3);
      tester.failing.delete(exit);
      await round(2);
      tester.drifted.set(exit, '203.0.113.7');
      await round(3);
      tester.drifted.delete(exit);
      await round(2);
      assert.deepEqual(await logged(), [
        'egress_ip.created',
        'egress_ip.test.failed',
        'egress_ip.test.recovered',
        'egress_ip.exit_ip.drifted',
        'egress_ip.test.recovered',
      ]);
      const metrics = await t.request('GET', '/metrics');
      assert.match(String(metrics.body), new RegExp(`ccp_egress_test_ok\\{egress_ip_id="${id}"[^}]*\\} 1`));

      await t.request('POST', `/v1/admin/egress-ips/${id}/test`);
      assert.equal((await logged()).at(-1), 'egress_ip.test.passed', "an admin's own test is always logged");
    });
  });
}
