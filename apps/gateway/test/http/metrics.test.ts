import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { EgressTestResult, ProxyConfig } from '@ccp/api';
import type { EgressTester } from '../../src/domain/egress/egress-ips-service.js';
import { MemoryRuntime } from '../helpers/memory-runtime.js';
import { SseClient } from '../helpers/sse-client.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/** Passes every upstream except 198.51.100.66, with a fixed latency. */
class FixedTester implements EgressTester {
  async test(_config: ProxyConfig, declaredIp: string): Promise<EgressTestResult> {
    const ok = declaredIp !== '198.51.100.66';
    const error = ok ? null : 'timeout';
    return {
      ok,
      tested_at: '2026-01-02T03:04:05Z',
      duration_ms: ok ? 1250 : 30000,
      checks: {
        connectivity: { ok, latency_ms: ok ? 42 : null, error },
        exit_ip: { ok, expected: declaredIp, observed: ok ? declaredIp : null, error },
        dns_leak: { ok, resolver_ip: ok ? declaredIp : null, error },
      },
    };
  }
}

/** The value of one series in Prometheus text format, or undefined when absent. */
function sample(text: string, series: string): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  }
  return undefined;
}

for (const kind of DATABASES) {
  describe(`GET /metrics (${kind})`, () => {
    let t: TestGateway;
    const runtime = new MemoryRuntime();
    let passing: string;
    let failing: string;

    before(async () => {
      t = await startTestGateway(kind, { METRICS_BIND: '127.0.0.1:0' }, runtime, {
        egressTester: new FixedTester(),
      });
      await t.listen();
    });
    after(() => t.close());

    const scrape = async () => {
      const response = await t.request('GET', '/metrics');
      assert.equal(response.status, 200);
      assert.match(String(response.headers['content-type']), /^text\/plain; version=0\.0\.4/);
      return response.body as string;
    };

    it('answers only admins on the HTTP port', async () => {
      const user = await t.createUser('metrics-user');
      assert.equal((await t.request('GET', '/metrics', { token: null })).status, 401);
      assert.equal((await t.request('GET', '/metrics', { token: user.token })).status, 403);
      assert.match(await scrape(), /^# HELP ccp_http_requests_total /m);
    });

    it('counts requests by route pattern and status, hosts by state, tasks by kind and outcome', async () => {
      const health = await t.request('GET', '/healthz', { token: null });
      await t.request('GET', '/healthz', { token: null });
      assert.equal((await t.request('GET', '/v1/admin/no-such-thing')).status, 404);
      const user = await t.createUser('metrics-owner');
      const egress = (exit: string) =>
        t.request('POST', '/v1/admin/egress-ips', {
          body: {
            label: `exit ${exit}`,
            ip_address: exit,
            proxy_config: { type: 'socks', server: exit, server_port: 1080 },
          },
        });
      passing = (await egress('198.51.100.65')).body.id;
      failing = (await egress('198.51.100.66')).body.id;
      const hosts: string[] = [];
      for (let i = 0; i < 3; i++) {
        const created = await t.request('POST', '/v1/admin/hosts', {
          body: { user_id: user.id, egress_ip_id: passing },
        });
        assert.equal(created.status, 201);
        hosts.push(created.body.id);
      }
      assert.equal((await t.request('POST', `/v1/admin/hosts/${hosts[0]}/start`)).status, 202);
      await t.gateway.tasks.idle();
      runtime.failNextStart = 'engine_error';
      assert.equal((await t.request('POST', `/v1/admin/hosts/${hosts[1]}/start`)).status, 202);
      await t.gateway.tasks.idle();

      const text = await scrape();
      assert.equal(
        sample(text, `ccp_http_requests_total{method="GET",route="/healthz",status="${health.status}"}`),
        2,
      );
      assert.equal(
        sample(
          text,
          'ccp_http_requests_total{method="POST",route="/v1/admin/hosts/:hostID/start",status="202"}',
        ),
        2,
      );
      assert.equal(
        sample(text, 'ccp_http_requests_total{method="POST",route="/v1/admin/hosts",status="201"}'),
        3,
      );
      assert.doesNotMatch(text, /no-such-thing/, 'unknown paths do not become labels');
      assert.ok(
        (sample(text, 'ccp_http_request_duration_seconds_count{method="POST",route="/v1/admin/hosts"}') ??
          0) >= 3,
      );
      assert.equal(sample(text, 'ccp_hosts{status="running"}'), 1);
      assert.equal(sample(text, 'ccp_hosts{status="failed"}'), 1);
      assert.equal(sample(text, 'ccp_hosts{status="created"}'), 1);
      assert.equal(sample(text, 'ccp_hosts{status="stopping"}'), 0);
      assert.equal(sample(text, 'ccp_tasks{kind="start",status="succeeded"}'), 1);
      assert.equal(sample(text, 'ccp_tasks{kind="start",status="failed"}'), 1);
      assert.equal(sample(text, 'ccp_database_up'), 1);
      assert.equal(sample(text, 'ccp_ssh_sessions'), 0);
      assert.equal(sample(text, 'ccp_vnc_sessions'), 0);
      assert.equal(sample(text, 'ccp_terminal_sessions'), 0);
      assert.ok((sample(text, 'process_resident_memory_bytes') ?? 0) > 0);
    });

    it('reports the last egress test of each egress IP: result, duration and latency', async () => {
      assert.doesNotMatch(await scrape(), /^ccp_egress_test_ok\{/m, 'no series before a test');
      await t.request('POST', `/v1/admin/egress-ips/${passing}/test`);
      await t.request('POST', `/v1/admin/egress-ips/${failing}/test`);
      const text = await scrape();
      const labels = (id: string, exit: string) => `{egress_ip_id="${id}",label="exit ${exit}"}`;
      assert.equal(sample(text, `ccp_egress_test_ok${labels(passing, '198.51.100.65')}`), 1);
      assert.equal(sample(text, `ccp_egress_test_ok${labels(failing, '198.51.100.66')}`), 0);
      assert.equal(sample(text, `ccp_egress_test_duration_seconds${labels(passing, '198.51.100.65')}`), 1.25);
      assert.equal(sample(text, `ccp_egress_test_duration_seconds${labels(failing, '198.51.100.66')}`), 30);
      assert.equal(sample(text, `ccp_egress_test_latency_seconds${labels(passing, '198.51.100.65')}`), 0.042);
      assert.equal(
        sample(text, `ccp_egress_test_latency_seconds${labels(failing, '198.51.100.66')}`),
        undefined,
      );
      assert.equal(
        sample(text, `ccp_egress_test_timestamp_seconds${labels(passing, '198.51.100.65')}`),
        Date.parse('2026-01-02T03:04:05Z') / 1000,
      );
    });

    it('counts connected SSE clients', async () => {
      const client = await SseClient.open(`${t.url}/v1/admin/sse?token=${t.adminToken}`);
      try {
        assert.equal(client.status, 200);
        assert.equal(sample(await scrape(), 'ccp_sse_clients'), 1);
      } finally {
        client.close();
      }
      await t.gateway.http.inject({ url: '/healthz' }); // let the close reach the server
      for (let i = 0; i < 50 && sample(await scrape(), 'ccp_sse_clients') !== 0; i++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.equal(sample(await scrape(), 'ccp_sse_clients'), 0);
    });

    it('serves the same series without a token on METRICS_BIND, and nothing else there', async () => {
      const { port } = t.gateway.metrics.server!.address() as AddressInfo;
      const response = await fetch(`http://127.0.0.1:${port}/metrics`);
      assert.equal(response.status, 200);
      const text = await response.text();
      assert.equal(sample(text, 'ccp_hosts{status="running"}'), 1);
      assert.ok(
        (sample(text, 'ccp_http_requests_total{method="GET",route="/metrics",status="200"}') ?? 0) >= 1,
      );
      assert.equal((await fetch(`http://127.0.0.1:${port}/v1/admin/users`)).status, 404);
    });
  });
}
