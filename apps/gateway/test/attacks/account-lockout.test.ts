import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { assertError } from '../helpers/expect.js';
import { ADMIN_PASSWORD, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/**
 * Attacks on the password checks shared by login, entry auth and bootstrap: whoever knows a username (they are
 * public in `user+shortid`) must not be able to lock that account out, nor stall every login with a burst.
 */
describe('attack: locking accounts out through the failure limiter', () => {
  let t: TestGateway;
  before(async () => {
    t = await startTestGateway('sqlite');
  });
  after(() => t.close());

  const loginFrom = async (username: string, password: string, remoteAddress: string) => {
    const response = await t.gateway.http.inject({
      method: 'POST',
      url: '/v1/auth/login',
      remoteAddress,
      payload: { username, password },
    });
    return { status: response.statusCode, body: response.json(), headers: response.headers };
  };

  it('ten wrong passwords for admin from a foreign address do not lock admin out of its own address', async () => {
    for (let i = 0; i < 10; i++)
      assertError(await loginFrom('admin', `guess-${i}`, '203.0.113.7'), 401, 'invalid_credentials');
    // The attacker's own address is the one that is refused...
    assertError(await loginFrom('admin', ADMIN_PASSWORD, '203.0.113.7'), 429, 'rate_limited');
    // ...not the account: the admin still logs in from anywhere else.
    assert.equal((await loginFrom('admin', ADMIN_PASSWORD, '198.51.100.20')).status, 200);
  });

  it('failures spread over many addresses slow the account down but never lock it', async () => {
    const victim = await t.createUser('victim', 'victim-password');
    const host = await t.request('POST', '/v1/admin/hosts', { body: { user_id: victim.id } });
    assert.equal(host.status, 201, JSON.stringify(host.body));
    for (let a = 0; a < 6; a++)
      for (let i = 0; i < 9; i++)
        assertError(
          await loginFrom('victim', `guess-${i}`, `203.0.113.${a + 10}`),
          401,
          'invalid_credentials',
        );
    assert.equal((await loginFrom('victim', 'victim-password', '198.51.100.21')).status, 200);
    const entry = await t.gateway.http.inject({
      method: 'POST',
      url: `/v1/entry/${host.body.short_id}/auth`,
      remoteAddress: '198.51.100.21',
      payload: { password: 'victim-password' },
    });
    // Past the password check: the host answers (it has no egress IP bound in this test).
    assert.equal(entry.json().code, 'no_egress_bound', entry.body);
  });

  it('a burst of parallel logins from one address gets 429 instead of stalling everyone else', async () => {
    await t.createUser('bystander', 'bystander-password');
    const burst = Array.from({ length: 40 }, (_, i) => loginFrom(`nobody${i}`, 'x', '203.0.113.30'));
    const started = Date.now();
    const bystander = await loginFrom('bystander', 'bystander-password', '198.51.100.22');
    const waited = Date.now() - started;
    const answers = await Promise.all(burst);
    const burstTook = Date.now() - started;
    assert.equal(bystander.status, 200);
    const refused = answers.filter((a) => a.status === 429);
    assert.ok(refused.length > 0, 'no request of the burst was refused');
    for (const answer of refused) {
      assertError(answer as never, 429, 'rate_limited');
      assert.ok(Number(answer.headers['retry-after']) >= 1);
    }
    assert.ok(
      waited < burstTook / 2 || waited < 1_000,
      `the bystander waited ${waited} ms (burst: ${burstTook} ms)`,
    );
  });
});
