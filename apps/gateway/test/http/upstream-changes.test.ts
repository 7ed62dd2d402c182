import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { EgressTestResult, ProxyConfig } from '@ccp/api';
import type { EgressTester } from '../../src/domain/egress/egress-ips-service.js';
import { MemoryRuntime } from '../helpers/memory-runtime.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/** Fails every upstream whose server port is listed (a mistyped port or password looks the same to a test). */
class ScriptedTester implements EgressTester {
  readonly failingPorts = new Set<number>();
  readonly tested: string[] = [];
  async test(config: ProxyConfig, declaredIp: string): Promise<EgressTestResult> {
    this.tested.push(`${config.server}:${config.server_port}`);
    const ok = !this.failingPorts.has(config.server_port);
    const error = ok ? null : 'upstream refused the connection';
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

const socks = (exit: string, port = 1080) => ({ type: 'socks', server: exit, server_port: port });

for (const kind of DATABASES) {
  describe(`changing or losing an upstream never breaks a running workspace (${kind})`, () => {
    let t: TestGateway;
    const runtime = new MemoryRuntime();
    const tester = new ScriptedTester();
    let users = 0;
    before(async () => {
      t = await startTestGateway(kind, {}, runtime, { egressTester: tester });
    });
    after(() => t.close());

    const egress = async (exit: string) =>
      (
        await t.request('POST', '/v1/admin/egress-ips', {
          body: { label: exit, ip_address: exit, proxy_config: socks(exit) },
        })
      ).body.id as string;
    const host = async (egressIpId: string) => {
      const user = await t.createUser(`up${users++}${kind}`);
      return (
        await t.request('POST', '/v1/admin/hosts', { body: { user_id: user.id, egress_ip_id: egressIpId } })
      ).body as { id: string };
    };
    const runningHost = async (egressIpId: string) => {
      const created = await host(egressIpId);
      await t.request('POST', `/v1/admin/hosts/${created.id}/start`);
      await t.gateway.tasks.idle();
      assert.equal((await t.request('GET', `/v1/admin/hosts/${created.id}`)).body.status, 'running');
      return created;
    };
    const events = async (type: string, hostId?: string) =>
      (await t.request('GET', `/v1/admin/events?type=${type}${hostId ? `&host_id=${hostId}` : ''}`)).body
        .events as any[];
    const task = async (id: string) => (await t.request('GET', `/v1/admin/tasks/${id}`)).body;

    describe('edits are tested before they are applied', () => {
      it('refuses an edit that fails the test while running hosts use the egress IP, storing nothing', async () => {
        const exit = '198.51.100.61';
        const id = await egress(exit);
        const running = await runningHost(id);
        const before = (await t.request('GET', `/v1/admin/egress-ips/${id}`)).body;
        tester.failingPorts.add(1099);
        const refused = await t.request('PUT', `/v1/admin/egress-ips/${id}`, {
          body: { label: 'renamed', proxy_config: socks(exit, 1099) },
        });
        assert.equal(refused.status, 422, JSON.stringify(refused.body));
        assert.equal(refused.body.code, 'egress_test_failed');
        assert.match(refused.body.error, /connectivity: upstream refused the connection/);
        assert.equal(refused.body.test_result.ok, false);
        assert.equal(refused.body.test_result.checks.connectivity.error, 'upstream refused the connection');
        assert.deepEqual(refused.body.host_ids, [running.id]);

        const after = (await t.request('GET', `/v1/admin/egress-ips/${id}`)).body;
        assert.deepEqual(after, before, 'nothing of the edit is stored, not even the label');
        assert.equal(runtime.hosts.get(running.id)?.upstream?.config.server_port, 1080);
        assert.ok(!runtime.calls.includes(`switch ${running.id} ${exit}`), 'the host never switched');
        assert.equal((await t.request('GET', `/v1/admin/hosts/${running.id}`)).body.status, 'running');
        const [logged] = await events('egress_ip.update.refused');
        assert.equal(logged.level, 'warn');
        assert.equal(logged.data.egress_ip_id, id);
        assert.equal(logged.data.result.ok, false);
      });

      it('applies an edit that passes, switches the running host and keeps the result as last_test', async () => {
        const exit = '198.51.100.62';
        const id = await egress(exit);
        const running = await runningHost(id);
        const updated = await t.request('PUT', `/v1/admin/egress-ips/${id}`, {
          body: { proxy_config: socks(exit, 1081) },
        });
        assert.equal(updated.status, 200, JSON.stringify(updated.body));
        assert.equal(updated.body.proxy_config.server_port, 1081);
        assert.equal(updated.body.last_test.ok, true, 'the test of the edit is the last test');
        assert.ok(tester.tested.includes(`${exit}:1081`));
        assert.equal(runtime.hosts.get(running.id)?.upstream?.config.server_port, 1081);
        assert.equal((await events('host.upstream_switched', running.id)).length, 1);
      });

      it('keeps a host running on the upstream it had when its switch fails, and says so', async () => {
        const exit = '198.51.100.63';
        const id = await egress(exit);
        const [first, second] = [await runningHost(id), await runningHost(id)];
        runtime.failNextSwitch = 'exit_ip_mismatch';
        const callsBefore = runtime.calls.length;
        const updated = await t.request('PUT', `/v1/admin/egress-ips/${id}`, {
          body: { proxy_config: socks(exit, 1082) },
        });
        assert.equal(updated.status, 200, 'the edit passed its test and is stored');
        assert.equal(updated.body.proxy_config.server_port, 1082);

        // The first host switched is the one whose switch fails.
        const firstSwitch = runtime.calls.slice(callsBefore).find((c) => c.startsWith('switch '));
        const failed = firstSwitch === `switch ${first.id} ${exit}` ? first : second;
        const other = failed === first ? second : first;
        const details = (await t.request('GET', `/v1/admin/hosts/${failed.id}`)).body;
        assert.equal(details.status, 'running');
        assert.equal(details.last_error, null);
        assert.equal(runtime.hosts.get(failed.id)?.state, 'running');
        assert.equal(
          runtime.hosts.get(failed.id)?.upstream?.config.server_port,
          1080,
          'back on the old config',
        );
        assert.equal(
          runtime.hosts.get(other.id)?.upstream?.config.server_port,
          1082,
          'the other host switched',
        );
        const [logged] = await events('host.upstream.switch_failed', failed.id);
        assert.ok(logged, 'the failed switch is in the event log');
        assert.equal(logged.level, 'warn');
        assert.equal(logged.data.code, 'exit_ip_mismatch');
        assert.equal(logged.data.egress_ip_id, id);
        assert.equal((await events('host.failed', failed.id)).length, 0);

        // The next health round tries the host again, and this time the switch goes through.
        await t.gateway.lifecycle.checkUpstreams(t.gateway.access.system('test: health round'));
        assert.equal(runtime.hosts.get(failed.id)?.upstream?.config.server_port, 1082, 'retried');
        assert.equal((await events('host.upstream_switched', failed.id)).length, 1);
        const switches = runtime.calls.filter((c) => c.startsWith('switch ')).length;
        await t.gateway.lifecycle.checkUpstreams(t.gateway.access.system('test: health round'));
        assert.equal(
          runtime.calls.filter((c) => c.startsWith('switch ')).length,
          switches,
          'a host on its current upstream is left alone',
        );
      });

      it('stores an edit at once, clearing last_test, when no running host uses the egress IP', async () => {
        const exit = '198.51.100.64';
        const id = await egress(exit);
        const stopped = await host(id);
        await t.request('POST', `/v1/admin/egress-ips/${id}/test`);
        assert.ok((await t.request('GET', `/v1/admin/egress-ips/${id}`)).body.last_test);
        tester.failingPorts.add(1098);
        const calls = tester.tested.length;
        const updated = await t.request('PUT', `/v1/admin/egress-ips/${id}`, {
          body: { proxy_config: socks(exit, 1098) },
        });
        assert.equal(updated.status, 200, JSON.stringify(updated.body));
        assert.equal(updated.body.proxy_config.server_port, 1098);
        assert.equal(updated.body.last_test, null);
        assert.equal(tester.tested.length, calls, 'no test: nothing depends on it yet');
        assert.deepEqual(updated.body.bound_host_ids, [stopped.id]);
      });
    });

    describe('a start can be cancelled', () => {
      it('ends a waiting start when the host is stopped: the start is cancelled, the stop runs', async () => {
        const created = await host(await egress('198.51.100.71'));
        runtime.holdStarts = true;
        try {
          const started = await t.request('POST', `/v1/admin/hosts/${created.id}/start`);
          assert.equal(started.status, 202);
          await waitFor(() => runtime.calls.includes(`start ${created.id} 198.51.100.71`));
          const began = Date.now();
          const stop = await t.request('POST', `/v1/admin/hosts/${created.id}/stop`);
          assert.equal(stop.status, 202, JSON.stringify(stop.body));
          assert.ok(Date.now() - began < 2000, 'the stop did not wait for the start');
          assert.notEqual(stop.body.task_id, started.body.task_id);
          await t.gateway.tasks.idle();

          const cancelled = await task(started.body.task_id);
          assert.equal(cancelled.status, 'failed');
          assert.equal(cancelled.error.code, 'cancelled');
          assert.match(cancelled.error.message, /stop/);
          assert.ok(cancelled.finished_at);
          assert.equal((await task(stop.body.task_id)).status, 'succeeded');
          const details = (await t.request('GET', `/v1/admin/hosts/${created.id}`)).body;
          assert.equal(details.status, 'stopped');
          assert.ok(runtime.calls.includes(`start cancelled ${created.id}`));
          assert.equal(runtime.hosts.has(created.id), false, 'the cancelled start left nothing behind');
          assert.equal((await events('task.start.cancelled', created.id)).length, 1);
          assert.equal((await events('host.failed', created.id)).length, 0);
        } finally {
          runtime.releaseStarts();
          await t.gateway.tasks.idle();
        }
      });

      it('ends a waiting start when the host is deleted, and deletes it', async () => {
        const created = await host(await egress('198.51.100.72'));
        runtime.holdStarts = true;
        try {
          const started = await t.request('POST', `/v1/admin/hosts/${created.id}/start`);
          await waitFor(() => runtime.calls.includes(`start ${created.id} 198.51.100.72`));
          const deleted = await t.request('DELETE', `/v1/admin/hosts/${created.id}`);
          assert.equal(deleted.status, 204, JSON.stringify(deleted.body));
          const cancelled = await task(started.body.task_id);
          assert.equal(cancelled.status, 'failed');
          assert.equal(cancelled.error.code, 'cancelled');
          assert.equal((await t.request('GET', `/v1/admin/hosts/${created.id}`)).status, 404);
          assert.ok(runtime.calls.includes(`remove ${created.id}`));
          assert.equal(runtime.hosts.has(created.id), false);
        } finally {
          runtime.releaseStarts();
          await t.gateway.tasks.idle();
        }
      });

      it('still refuses a rebuild while a start runs', async () => {
        const created = await host(await egress('198.51.100.73'));
        runtime.holdStarts = true;
        try {
          const started = await t.request('POST', `/v1/admin/hosts/${created.id}/start`);
          const busy = await t.request('POST', `/v1/admin/hosts/${created.id}/rebuild`);
          assert.equal(busy.status, 409);
          assert.equal(busy.body.code, 'host_busy');
          assert.equal(busy.body.task_id, started.body.task_id);
        } finally {
          runtime.releaseStarts();
          await t.gateway.tasks.idle();
        }
        assert.equal((await t.request('GET', `/v1/admin/hosts/${created.id}`)).body.status, 'running');
      });
    });
  });
}

async function waitFor(condition: () => boolean, ms = 2000): Promise<void> {
  const until = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
