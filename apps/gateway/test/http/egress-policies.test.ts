import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MemoryRuntime } from '../helpers/memory-runtime.js';
import { passingTester } from '../helpers/passing-tester.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const GLOBAL = {
  mode: 'log-only',
  default_action: 'allow',
  rules: [{ action: 'deny', domain: 'global.test' }],
};
const USER_DEFAULT = {
  mode: 'enforce',
  default_action: 'allow',
  rules: [{ action: 'deny', domain: '*.user.test' }],
};
const OWN = {
  mode: 'enforce',
  default_action: 'deny',
  rules: [
    { action: 'allow', domain: 'api.example.com', port: '443' },
    { action: 'allow', address: '203.0.113.0/24' },
  ],
};

/**
 * Egress policies through the API: a host follows its own, else its owner's default, else the gateway's
 * (EGRESS_POLICY); admins set and remove them, owners read them; a running host is handed its new policy at once;
 * bad rules are refused naming the field. (The policy inside real egress gateways: egress-policy.test.ts.)
 */
for (const kind of DATABASES) {
  describe(`egress policies (${kind})`, () => {
    let t: TestGateway;
    let runtime: MemoryRuntime;
    let exit: string;

    before(async () => {
      runtime = new MemoryRuntime();
      t = await startTestGateway(kind, { EGRESS_POLICY: JSON.stringify(GLOBAL) }, runtime, {
        egressTester: passingTester,
      });
      await t.listen();
      exit = await t.createEgressIp('198.51.100.21');
    });
    after(() => t.close());

    const newHost = async (userId: string) =>
      (await t.request('POST', '/v1/admin/hosts', { body: { user_id: userId, egress_ip_id: exit } })).body;
    const effective = async (hostId: string) =>
      (await t.request('GET', `/v1/admin/hosts/${hostId}`)).body.egress_policy;

    it('resolves the policy: the host’s own, else the owner’s default, else the gateway’s', async () => {
      const user = await t.createUser('paula');
      const host = await newHost(user.id);
      assert.deepEqual(host.egress_policy, { ...GLOBAL, source: 'global' });

      const setUser = await t.request('PUT', `/v1/admin/users/${user.id}/egress-policy`, {
        body: USER_DEFAULT,
      });
      assert.equal(setUser.status, 200, JSON.stringify(setUser.body));
      assert.deepEqual(setUser.body, { user: USER_DEFAULT, global: GLOBAL });
      assert.deepEqual(await effective(host.id), { ...USER_DEFAULT, source: 'user' });

      const setOwn = await t.request('PUT', `/v1/admin/hosts/${host.id}/egress-policy`, { body: OWN });
      assert.equal(setOwn.status, 200, JSON.stringify(setOwn.body));
      assert.deepEqual(setOwn.body.host, OWN);
      assert.deepEqual(setOwn.body.user, USER_DEFAULT);
      assert.deepEqual(setOwn.body.global, GLOBAL);
      assert.deepEqual(setOwn.body.effective, { ...OWN, source: 'host' });
      // The path check's own destinations come first while a policy is enforced (the gateway's IP echoes).
      assert.ok(setOwn.body.always_allowed.length > 0);
      assert.ok(setOwn.body.always_allowed.every((rule: { action: string }) => rule.action === 'allow'));
      assert.deepEqual(await effective(host.id), { ...OWN, source: 'host' });

      const removed = await t.request('DELETE', `/v1/admin/hosts/${host.id}/egress-policy`);
      assert.equal(removed.status, 200);
      assert.equal(removed.body.host, null);
      assert.deepEqual(removed.body.effective, { ...USER_DEFAULT, source: 'user' });
      await t.request('DELETE', `/v1/admin/users/${user.id}/egress-policy`);
      assert.deepEqual(await effective(host.id), { ...GLOBAL, source: 'global' });
    });

    it('hands a running host its new policy at once, and a start the one in force', async () => {
      const user = await t.createUser('quinn');
      const host = await newHost(user.id);
      await t.request('PUT', `/v1/admin/users/${user.id}/egress-policy`, { body: USER_DEFAULT });
      await t.request('POST', `/v1/admin/hosts/${host.id}/start`);
      await t.gateway.tasks.idle();
      assert.deepEqual(runtime.hosts.get(host.id)?.spec.egressPolicy, USER_DEFAULT);

      const set = await t.request('PUT', `/v1/admin/hosts/${host.id}/egress-policy`, { body: OWN });
      assert.equal(set.status, 200);
      // Applied before the answer: the host's gateway follows it now.
      assert.deepEqual(runtime.hosts.get(host.id)?.spec.egressPolicy, OWN);
      const events = async (type: string) =>
        (await t.request('GET', `/v1/admin/events?host_id=${host.id}&type=${type}`)).body.events;
      const [changed] = await events('host.egress_policy_changed');
      assert.deepEqual(changed.data.policy, OWN);
      assert.equal(changed.data.effective.source, 'host');
      const [applied] = await events('host.egress_policy_applied');
      assert.equal(applied.data.mode, 'enforce');
      assert.equal(typeof applied.data.duration_ms, 'number');

      // A user default reaches the running hosts without a policy of their own, after the answer.
      await t.request('DELETE', `/v1/admin/hosts/${host.id}/egress-policy`);
      const off = { mode: 'off', default_action: 'allow', rules: [] };
      await t.request('PUT', `/v1/admin/users/${user.id}/egress-policy`, { body: off });
      for (let i = 0; i < 100 && runtime.hosts.get(host.id)?.spec.egressPolicy?.mode !== 'off'; i++)
        await new Promise((resolve) => setTimeout(resolve, 20));
      assert.deepEqual(runtime.hosts.get(host.id)?.spec.egressPolicy, off);
    });

    it('a policy set while the host starts is followed once it runs', async () => {
      const user = await t.createUser('ulla');
      const host = await newHost(user.id);
      runtime.holdStarts = true;
      await t.request('POST', `/v1/admin/hosts/${host.id}/start`);
      for (
        let i = 0;
        i < 100 && (await t.request('GET', `/v1/admin/hosts/${host.id}`)).body.status !== 'starting';
        i++
      )
        await new Promise((resolve) => setTimeout(resolve, 20));
      const set = await t.request('PUT', `/v1/admin/hosts/${host.id}/egress-policy`, { body: OWN });
      assert.equal(set.status, 200);
      runtime.releaseStarts();
      await t.gateway.tasks.idle();
      assert.equal((await t.request('GET', `/v1/admin/hosts/${host.id}`)).body.status, 'running');
      assert.deepEqual(runtime.hosts.get(host.id)?.spec.egressPolicy, OWN);
    });

    it('refuses rules it cannot enforce, naming the field and saying what is wanted', async () => {
      const user = await t.createUser('rafa');
      const host = await newHost(user.id);
      const put = (rules: unknown[], extra: Record<string, unknown> = {}) =>
        t.request('PUT', `/v1/admin/hosts/${host.id}/egress-policy`, {
          body: { mode: 'enforce', default_action: 'allow', rules, ...extra },
        });
      const nothing = await put([{ action: 'deny' }]);
      assert.equal(nothing.status, 400);
      assert.equal(nothing.body.code, 'validation_failed');
      assert.deepEqual(nothing.body.details, [
        { field: 'rules.0', message: 'matches nothing: give a domain, an address or a port' },
      ]);
      assert.match(nothing.body.error, /^Invalid field rules\.0: matches nothing/);

      const bad = await put([
        { action: 'deny', domain: 'example.com' },
        { action: 'deny', address: '203.0.113.0/33' },
        { action: 'allow', port: '9000-8000' },
      ]);
      assert.equal(bad.status, 400);
      assert.deepEqual(
        bad.body.details.map((detail: { field: string }) => detail.field),
        ['rules.1.address', 'rules.2.port'],
      );
      assert.match(bad.body.details[0].message, /not an address or CIDR block/);

      const name = await put([{ action: 'deny', domain: 'Example..com' }]);
      assert.equal(name.status, 400);
      assert.equal(name.body.details[0].field, 'rules.0.domain');

      const many = await put(
        Array.from({ length: 501 }, (_, i) => ({ action: 'deny', port: String(i + 1) })),
      );
      assert.equal(many.status, 400);
      assert.equal(many.body.details[0].field, 'rules');

      const mode = await put([], { mode: 'block' });
      assert.equal(mode.status, 400);
      assert.equal(mode.body.details[0].field, 'mode');
      // Nothing was stored.
      assert.deepEqual(await effective(host.id), { ...GLOBAL, source: 'global' });
    });

    it('lets the owner read the policy of their host, and only admins set one', async () => {
      const owner = await t.createUser('sam');
      const other = await t.createUser('tess');
      const host = await newHost(owner.id);
      await t.request('PUT', `/v1/admin/hosts/${host.id}/egress-policy`, { body: OWN });
      const read = await t.request('GET', `/v1/user/hosts/${host.id}/egress-policy`, { token: owner.token });
      assert.equal(read.status, 200);
      assert.deepEqual(read.body.effective, { ...OWN, source: 'host' });
      const own = await t.request('GET', `/v1/user/hosts/${host.id}`, { token: owner.token });
      assert.deepEqual(own.body.egress_policy, { ...OWN, source: 'host' });
      const stranger = await t.request('GET', `/v1/user/hosts/${host.id}/egress-policy`, {
        token: other.token,
      });
      assert.equal(stranger.status, 404);
      const write = await t.request('PUT', `/v1/admin/hosts/${host.id}/egress-policy`, {
        token: owner.token,
        body: USER_DEFAULT,
      });
      assert.equal(write.status, 403);
    });
  });
}
