import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type EgressTestResult, MASKED_SECRET, type ProxyConfig } from '@ccp/api';
import type { EgressTester } from '../../src/domain/egress/egress-ips-service.js';
import { mergeMaskedSecrets } from '../../src/egress/proxy-config.js';
import { assertValidation } from '../helpers/expect.js';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const SECRET = 'stored-trojan-secret';
const stored: ProxyConfig = {
  type: 'trojan',
  server: '198.51.100.21',
  server_port: 443,
  password: SECRET,
  tls: { enabled: true, server_name: 'exit1.example.test' },
};
const masked = { ...stored, password: MASKED_SECRET };
/** Each way of pointing the stored secret somewhere else: a server of the attacker's, or another protocol. */
const REDIRECTS: [string, object][] = [
  ['server', { ...masked, server: '203.0.113.66' }],
  ['server_port', { ...masked, server_port: 8443 }],
  [
    'type',
    {
      type: 'shadowsocks',
      server: '198.51.100.21',
      server_port: 443,
      method: 'aes-256-gcm',
      password: MASKED_SECRET,
    },
  ],
];

/**
 * The API never shows an egress secret; an update sends "********" back to keep it. Whoever may update an egress
 * IP (an admin, or a stolen admin session) must not be able to carry the stored secret to a server of their
 * choosing with that mask, and then have the egress test (or a bound host) hand it over.
 */
describe('attack: pulling an egress secret out through the mask', () => {
  it('the merge refuses a mask whose type, server or port changed, naming the secret', () => {
    for (const [changed, incoming] of REDIRECTS) {
      const result = mergeMaskedSecrets(incoming, stored);
      assert.doesNotMatch(
        JSON.stringify(result),
        new RegExp(SECRET),
        `${changed}: the secret left the store`,
      );
      assert.equal(result.ok, false, changed);
      if (result.ok) continue;
      assert.deepEqual(
        result.problems.map((p) => p.field),
        ['proxy_config.password'],
      );
      assert.match(result.problems[0]!.message, /send the secret again when the server changes/);
      assert.match(result.problems[0]!.message, new RegExp(changed));
    }
  });

  describe('through the API', () => {
    let t: TestGateway;
    const dialled: ProxyConfig[] = [];
    const tester: EgressTester = {
      async test(config) {
        dialled.push(config);
        const fail = { ok: false, error: 'not dialled in this test' };
        return {
          ok: false,
          tested_at: new Date().toISOString(),
          duration_ms: 0,
          checks: {
            connectivity: { ...fail, latency_ms: null },
            exit_ip: { ...fail, expected: '198.51.100.21', observed: null },
            dns_leak: { ...fail, resolver_ip: null },
          },
        } as EgressTestResult;
      },
    };
    before(async () => {
      t = await startTestGateway('sqlite', {}, undefined, { egressTester: tester });
    });
    after(() => t.close());

    it('answers 400 naming the secret, keeps the stored upstream, and the egress test never dials the attacker', async () => {
      const created = await t.request('POST', '/v1/admin/egress-ips', {
        body: { label: 'exit', ip_address: '198.51.100.21', proxy_config: stored },
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const id = created.body.id as string;

      for (const [changed, proxy_config] of REDIRECTS) {
        const response = await t.request('PUT', `/v1/admin/egress-ips/${id}`, { body: { proxy_config } });
        assertValidation(response, ['proxy_config.password']);
        assert.match(
          response.body.details[0].message,
          /send the secret again when the server changes/,
          changed,
        );
        assert.deepEqual(
          (await t.gateway.egressIps.proxyConfig(id)).config,
          stored,
          `${changed}: nothing changed`,
        );
        await t.request('POST', `/v1/admin/egress-ips/${id}/test`);
      }
      assert.ok(dialled.length > 0);
      for (const config of dialled)
        assert.deepEqual(config, stored, 'only the stored upstream is ever dialled');

      // The mask still works where it is safe: the same server, other fields changed.
      const same = await t.request('PUT', `/v1/admin/egress-ips/${id}`, {
        body: { proxy_config: { ...masked, tls: { enabled: true, server_name: 'exit2.example.test' } } },
      });
      assert.equal(same.status, 200, JSON.stringify(same.body));
      assert.equal(
        ((await t.gateway.egressIps.proxyConfig(id)).config as { password: string }).password,
        SECRET,
      );

      // And the secret sent again goes with the new server.
      const moved = await t.request('PUT', `/v1/admin/egress-ips/${id}`, {
        body: { proxy_config: { ...stored, server: '198.51.100.22', password: 'new-secret' } },
      });
      assert.equal(moved.status, 200, JSON.stringify(moved.body));
      assert.equal(moved.body.proxy_config.password, MASKED_SECRET);
    });
  });
});
