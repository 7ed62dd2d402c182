import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { needs } from '../../../../test/support/needs.js';
import { assertValidation } from '../helpers/expect.js';
import { SseClient } from '../helpers/sse-client.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const uuid = 'b831381d-6324-4d53-ad4f-8cda48b30811';
const configs: Record<string, object> = {
  socks: {
    type: 'socks',
    server: '198.51.100.21',
    server_port: 1081,
    version: '5',
    username: 'u1',
    password: 'socks-secret',
  },
  http: {
    type: 'http',
    server: 'exit1.example.test',
    server_port: 8080,
    username: 'u1',
    password: 'http-secret',
  },
  shadowsocks: {
    type: 'shadowsocks',
    server: '198.51.100.21',
    server_port: 8389,
    method: 'aes-256-gcm',
    password: 'ss-secret',
  },
  vmess: { type: 'vmess', server: '198.51.100.21', server_port: 10086, uuid, security: 'auto', alter_id: 0 },
  vless: {
    type: 'vless',
    server: '198.51.100.21',
    server_port: 10443,
    uuid,
    tls: { enabled: true, server_name: 'exit1.example.test' },
  },
  trojan: {
    type: 'trojan',
    server: '198.51.100.21',
    server_port: 10444,
    password: 'trojan-secret',
    tls: { enabled: true, server_name: 'exit1.example.test' },
  },
};
const SECRETS = ['socks-secret', 'http-secret', 'ss-secret', uuid, 'trojan-secret'];

for (const kind of DATABASES) {
  describe(`egress IPs API (${kind})`, () => {
    let t: TestGateway;
    before(async () => {
      t = await startTestGateway(kind);
      await t.listen();
    });
    after(() => t.close());

    const create = (proxy_config: object, extra: object = {}) =>
      t.request('POST', '/v1/admin/egress-ips', {
        body: {
          label: 'exit one',
          ip_address: '198.51.100.21',
          tunnel_type: 'proxy',
          provider: 'manual',
          proxy_config,
          ...extra,
        },
      });

    it('creates every protocol with secrets masked and sealed at rest', async () => {
      for (const [type, config] of Object.entries(configs)) {
        const response = await create(config);
        assert.equal(response.status, 201, `${type}: ${JSON.stringify(response.body)}`);
        assert.equal(response.body.proxy_config.type, type);
        assert.equal(response.body.tunnel_type, 'proxy');
        assert.equal(response.body.provider, 'manual');
        assert.deepEqual(response.body.bound_host_ids, []);
        assert.equal(response.body.last_test, null);
        for (const field of ['password', 'uuid']) {
          if (field in config)
            assert.equal(response.body.proxy_config[field], '********', `${type}.${field}`);
        }
        const stored = await t.gateway.egressIps.proxyConfig(response.body.id);
        assert.deepEqual(stored.config, config);
        assert.doesNotMatch(stored.row.proxy_config_sealed, /secret|b831381d/);
      }
      const list = await t.request('GET', '/v1/admin/egress-ips');
      assert.equal(list.body.egress_ips.length, 6);
      const text =
        JSON.stringify(list.body) +
        JSON.stringify((await t.request('GET', '/v1/admin/events?limit=500')).body);
      for (const secret of SECRETS) assert.ok(!text.includes(secret), `secret ${secret} leaked`);
    });

    it('rejects what the tunnel engine cannot do, naming the field', async () => {
      const cases: [object, string][] = [
        [{ ...configs.vless, flow: 'xtls-rprx-vision' }, 'proxy_config.flow'],
        [
          { ...configs.trojan, tls: { enabled: true, server_name: 'x', reality: { enabled: true } } },
          'proxy_config.tls.reality',
        ],
        [
          { ...configs.vless, tls: { enabled: true, utls: { enabled: true, fingerprint: 'chrome' } } },
          'proxy_config.tls.utls',
        ],
        [{ ...configs.vmess, transport: { type: 'grpc', service_name: 'x' } }, 'proxy_config.transport.type'],
        [{ ...configs.vmess, multiplex: { enabled: true } }, 'proxy_config.multiplex'],
        [{ ...configs.shadowsocks, method: '2022-blake3-aes-128-gcm' }, 'proxy_config.method'],
        [{ ...configs.shadowsocks, method: 'aes-256-cfb' }, 'proxy_config.method'],
        [{ ...configs.shadowsocks, plugin: 'obfs-local' }, 'proxy_config.plugin'],
        [{ ...configs.socks, version: '4' }, 'proxy_config.version'],
        [{ ...configs.socks, surprise: true }, 'proxy_config.surprise'],
        [{ ...configs.vmess, server_port: 70000 }, 'proxy_config.server_port'],
        [{ type: 'wireguard', server: '198.51.100.21', server_port: 51820 }, 'proxy_config.type'],
      ];
      for (const [config, field] of cases) {
        const response = await create(config);
        assert.equal(response.status, 400, JSON.stringify(config));
        assert.equal(response.body.code, 'validation_failed');
        assert.ok(
          response.body.details.some((d: any) => d.field === field),
          `${field} not named in ${JSON.stringify(response.body.details)}`,
        );
      }
      const badIp = await create(configs.socks!, { ip_address: 'not-an-ip' });
      assert.equal(badIp.status, 400);
      // One detail, not one per branch of the IPv4-or-IPv6 union plus the union's own.
      assert.deepEqual(badIp.body.details, [
        { field: 'ip_address', message: 'must match format "ipv4" or "ipv6"' },
      ]);
      assert.equal(badIp.body.error, 'Invalid field ip_address: must match format "ipv4" or "ipv6"');
      const noLabel = await t.request('POST', '/v1/admin/egress-ips', {
        body: { ip_address: '198.51.100.21', proxy_config: configs.socks },
      });
      assert.equal(noLabel.status, 400);
    });

    it('updates with PUT semantics and keeps masked secrets for the same server only', async () => {
      const created = (await create(configs.trojan!)).body;
      const labelOnly = await t.request('PUT', `/v1/admin/egress-ips/${created.id}`, {
        body: { label: 'renamed' },
      });
      assert.equal(labelOnly.status, 200);
      assert.equal(labelOnly.body.label, 'renamed');
      assert.equal(labelOnly.body.ip_address, '198.51.100.21');
      assert.equal(labelOnly.body.provider, 'manual');

      const masked = {
        ...labelOnly.body.proxy_config,
        tls: { enabled: true, server_name: 'exit2.example.test' },
      };
      const kept = await t.request('PUT', `/v1/admin/egress-ips/${created.id}`, {
        body: { proxy_config: masked },
      });
      assert.equal(kept.status, 200);
      const stored = await t.gateway.egressIps.proxyConfig(created.id);
      assert.equal((stored.config as any).password, 'trojan-secret');
      assert.equal((stored.config as any).tls.server_name, 'exit2.example.test');

      // A mask must not carry the stored secret to another port (attacks/egress-secret-through-mask.test.ts).
      const moved = await t.request('PUT', `/v1/admin/egress-ips/${created.id}`, {
        body: { proxy_config: { ...masked, server_port: 20444 } },
      });
      assertValidation(moved, ['proxy_config.password']);
      assert.equal((await t.gateway.egressIps.proxyConfig(created.id)).config.server_port, 10444);

      const replaced = { ...masked, server_port: 20444, password: 'new-trojan-secret' };
      await t.request('PUT', `/v1/admin/egress-ips/${created.id}`, {
        body: { proxy_config: replaced, ip_address: '198.51.100.22' },
      });
      const after = await t.gateway.egressIps.proxyConfig(created.id);
      assert.equal((after.config as any).password, 'new-trojan-secret');
      assert.equal(after.config.server_port, 20444);
      assert.equal(after.row.ip_address, '198.51.100.22');

      const invalid = await t.request('PUT', `/v1/admin/egress-ips/${created.id}`, {
        body: { proxy_config: { ...replaced, flow: 'xtls-rprx-vision' } },
      });
      assertValidation(invalid, ['proxy_config.flow']);
      assert.equal(
        (await t.gateway.egressIps.proxyConfig(created.id)).row.ip_address,
        '198.51.100.22',
        'nothing lost',
      );
      assert.equal(
        (await t.request('PUT', `/v1/admin/egress-ips/${randomUUID()}`, { body: { label: 'x' } })).status,
        404,
      );
    });

    it('refuses to delete a bound egress IP with the host ids, and deletes an unbound one', async () => {
      const created = (await create(configs.socks!)).body;
      const user = await t.createUser('egress-owner');
      const host = await t.request('POST', '/v1/admin/hosts', {
        body: { user_id: user.id, egress_ip_id: created.id },
      });
      const hostId = host.body.id;
      const refused = await t.request('DELETE', `/v1/admin/egress-ips/${created.id}`);
      assert.equal(refused.status, 409);
      assert.equal(refused.body.code, 'egress_ip_bound');
      assert.deepEqual(refused.body.host_ids, [hostId]);
      assert.deepEqual((await t.request('GET', `/v1/admin/egress-ips/${created.id}`)).body.bound_host_ids, [
        hostId,
      ]);

      const [binding] = (await t.request('GET', `/v1/admin/hosts/${hostId}`)).body.bindings;
      assert.equal((await t.request('DELETE', `/v1/admin/bindings/${binding.id}`)).status, 204);
      assert.equal((await t.request('DELETE', `/v1/admin/egress-ips/${created.id}`)).status, 204);
      assert.equal((await t.request('GET', `/v1/admin/egress-ips/${created.id}`)).status, 404);
      assert.equal((await t.request('GET', '/v1/admin/egress-ips/not-a-uuid')).status, 404);
    });

    it('logs every change and streams it to admins', async () => {
      const stream = await SseClient.open(`${t.url}/v1/admin/sse?topics=egress-ips&token=${t.adminToken}`);
      const created = (await create(configs.vmess!)).body;
      await t.request('PUT', `/v1/admin/egress-ips/${created.id}`, { body: { label: 'changed' } });
      await t.request('DELETE', `/v1/admin/egress-ips/${created.id}`);
      // With PostgreSQL a message of the previous test, read back from the table, may arrive just after connecting.
      const ofThisIp = () => stream.messages().filter((m) => m.data.id === created.id);
      await stream.waitFor(() => ofThisIp().length >= 3);
      assert.deepEqual(
        ofThisIp().map((m) => [m.data.action, m.data.id]),
        [
          ['create', created.id],
          ['update', created.id],
          ['delete', created.id],
        ],
      );
      stream.close();
      const events = await t.request('GET', '/v1/admin/events?type=egress_ip.created&limit=500');
      assert.ok(
        events.body.events.some((e: any) => e.data.egress_ip_id === created.id && e.actor.kind === 'admin'),
      );
    });

    it('stores and counts a failed test, naming the hop that failed', { skip: needs('v2ray') }, async () => {
      const closed = net.createServer();
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
      const { port } = closed.address() as net.AddressInfo;
      await new Promise((resolve) => closed.close(resolve));
      const created = (await create({ ...configs.socks!, server: '127.0.0.1', server_port: port })).body;
      const result = await t.request('POST', `/v1/admin/egress-ips/${created.id}/test`);
      assert.equal(result.status, 200);
      assert.equal(result.body.ok, false);
      assert.match(
        result.body.checks.connectivity.error,
        new RegExp(`upstream 127\\.0\\.0\\.1:${port} refused`),
      );
      const stored = await t.request('GET', `/v1/admin/egress-ips/${created.id}`);
      assert.equal(stored.body.last_test.ok, false);
      const stats = await t.request('GET', '/v1/admin/dashboard/stats');
      assert.ok(stats.body.egress_ips.failing >= 1);
    });
  });
}
