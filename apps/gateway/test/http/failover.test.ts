import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { EgressTestResult, ProxyConfig } from '@ccp/api';
import type { EgressTester } from '../../src/domain/egress-ips-service.js';
import { MemoryRuntime } from '../helpers/memory-runtime.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/** Declares upstreams healthy or failed by exit address, so failover can be driven step by step. */
class ScriptedTester implements EgressTester {
  readonly failing = new Set<string>();
  async test(_config: ProxyConfig, declaredIp: string): Promise<EgressTestResult> {
    const ok = !this.failing.has(declaredIp);
    const error = ok ? null : 'timeout';
    return {
      ok,
      tested_at: new Date().toISOString(),
      duration_ms: 1,
      checks: {
        connectivity: { ok, latency_ms: ok ? 1 : null, error },
        exit_ip: { ok, expected: declaredIp, observed: ok ? declaredIp : null, error },
        dns_leak: { ok, resolver_ip: ok ? declaredIp : null, error },
      },
    };
  }
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

    it('moves a running host to its healthy standby when the active upstream fails, and back', async () => {
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
      const primary = await egress('198.51.100.21');
      const standby = await egress('198.51.100.37');
      const user = await t.createUser('gina');
      const host = (
        await t.request('POST', '/v1/admin/hosts', { body: { user_id: user.id, egress_ip_id: primary } })
      ).body;
      await t.request('POST', '/v1/admin/bindings', { body: { host_id: host.id, egress_ip_id: standby } });
      await t.request('POST', `/v1/admin/hosts/${host.id}/start`);
      await t.gateway.tasks.idle();
      assert.equal(runtime.hosts.get(host.id)?.upstream?.exitIp, '198.51.100.21');

      await t.gateway.lifecycle.checkUpstreams();
      assert.equal(runtime.hosts.get(host.id)?.upstream?.exitIp, '198.51.100.21', 'healthy: no switch');

      tester.failing.add('198.51.100.21');
      await t.gateway.lifecycle.checkUpstreams();
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
      await t.gateway.lifecycle.checkUpstreams();
      assert.equal(
        runtime.hosts.get(host.id)?.upstream?.exitIp,
        '198.51.100.21',
        'the primary takes over again',
      );
    });
  });
}
