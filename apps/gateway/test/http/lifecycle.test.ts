import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SseClient } from '../helpers/sse-client.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

for (const kind of DATABASES) {
  describe(`expiry sweep and engine health (${kind})`, () => {
    let t: TestGateway;
    before(async () => {
      t = await startTestGateway(kind, { EXPIRY_SWEEP_SECONDS: '1', DOCKER_SOCKET: '/var/run/docker.sock' });
      await t.listen();
    });
    after(() => t.close());

    it('reports the real container engine as ok', async () => {
      const response = await t.request('GET', '/healthz', { token: null });
      assert.deepEqual(response.body, { status: 'ok', checks: { database: 'ok', agent: 'ok' } });
      assert.equal(response.status, 200);
    });

    it('applies expiry effects once within the sweep interval and restores access when moved', async () => {
      const dave = await t.createUser('dave');
      const stream = await SseClient.open(`${t.url}/v1/user/sse?token=${dave.token}`);
      assert.equal(stream.status, 200);
      const soon = new Date(Date.now() + 1500).toISOString();
      assert.equal(
        (await t.request('PUT', `/v1/admin/users/${dave.id}/expiry`, { body: { expires_at: soon } })).status,
        200,
      );
      await stream.waitFor((c) => c.ended, 5000);
      // The sweep ends live access first and logs `user.expired` just after.
      const expiredEvents = () => t.request('GET', `/v1/admin/events?user_id=${dave.id}&type=user.expired`);
      let expired = await expiredEvents();
      for (let i = 0; i < 50 && expired.body.total === 0; i++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        expired = await expiredEvents();
      }
      assert.equal(expired.body.total, 1);
      assert.equal((await t.request('GET', `/v1/admin/users/${dave.id}`)).body.expired, true);
      const refused = await t.request('POST', '/v1/auth/login', {
        token: null,
        body: { username: 'dave', password: dave.password },
      });
      assert.equal(refused.body.code, 'account_expired');

      await new Promise((resolve) => setTimeout(resolve, 1500));
      const again = await t.request('GET', `/v1/admin/events?user_id=${dave.id}&type=user.expired`);
      assert.equal(again.body.total, 1, 'the sweep applies the effects once');

      const later = new Date(Date.now() + 3600_000).toISOString();
      await t.request('PUT', `/v1/admin/users/${dave.id}/expiry`, { body: { expires_at: later } });
      assert.ok(await t.login('dave', dave.password));
    });

    it('answers an internal failure with a generic 500 and no internals', async () => {
      const broken = await startTestGateway(kind);
      const token = broken.adminToken;
      await broken.gateway.database.close();
      const response = await broken.request('GET', '/v1/admin/users', { token });
      assert.ok(response.status === 500 || response.status === 503, String(response.status));
      const text = JSON.stringify(response.body);
      assert.ok(['internal', 'database_unavailable'].includes(response.body.code));
      assert.doesNotMatch(text, /at |\.ts|sqlite|select|kysely|pool/i);
      await broken.close();
    });
  });
}
