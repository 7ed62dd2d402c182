import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const login = (t: TestGateway, forwardedFor: string, password = 'wrong-password') =>
  t.request('POST', '/v1/auth/login', {
    token: null,
    body: { username: 'admin', password },
    headers: { 'x-forwarded-for': forwardedFor },
  });

describe('client addresses behind a reverse proxy (TRUST_PROXY)', () => {
  let trusting: TestGateway;
  let plain: TestGateway;
  before(async () => {
    trusting = await startTestGateway('sqlite', { TRUST_PROXY: '127.0.0.1, ::1' });
    plain = await startTestGateway('sqlite');
  });
  after(async () => {
    await trusting.close();
    await plain.close();
  });

  it('counts failures per forwarded client when the proxy is trusted', async () => {
    // Different usernames would be limited separately; the shared address limit is what is under test.
    for (let i = 0; i < 10; i++) {
      const response = await trusting.request('POST', '/v1/auth/login', {
        token: null,
        body: { username: `nobody${i}`, password: 'x' },
        headers: { 'x-forwarded-for': '198.51.100.7' },
      });
      assert.equal(response.status, 401);
    }
    assert.equal((await login(trusting, '198.51.100.7')).status, 429);
    assert.equal((await login(trusting, '198.51.100.8')).status, 401, 'another client is not locked out');
    const failed = await trusting.request('GET', '/v1/admin/events?type=auth.login.failed&limit=1');
    assert.equal(failed.body.events[0].data.client_address, '198.51.100.8');
  });

  it('ignores X-Forwarded-For from anyone else, so a client cannot pick its address', async () => {
    for (let i = 0; i < 10; i++) {
      const response = await plain.request('POST', '/v1/auth/login', {
        token: null,
        body: { username: `nobody${i}`, password: 'x' },
        headers: { 'x-forwarded-for': `203.0.113.${i}` },
      });
      assert.equal(response.status, 401);
    }
    assert.equal((await login(plain, '203.0.113.99')).status, 429);
  });

  it('refuses a TRUST_PROXY that is not a list of addresses or ranges', () => {
    const base = { ADMIN_JWT_SECRET: 'x'.repeat(48), DATA_DIR: '/tmp/unused' };
    assert.deepEqual(loadConfig({ ...base, TRUST_PROXY: '10.0.0.0/8,::1' }).trustProxy, [
      '10.0.0.0/8',
      '::1',
    ]);
    assert.throws(
      () => loadConfig({ ...base, TRUST_PROXY: 'proxy.example,10.0.0.0/33' }),
      /TRUST_PROXY.*proxy\.example, 10\.0\.0\.0\/33/,
    );
  });
});
