import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/**
 * Hardening issue, point 4: a password change with a wrong old password ran scrypt outside the login limits, in
 * the queue every login shares, so any user could guess their way through, or stall every login, entry,
 * bootstrap and SSH password check by sending wrong old passwords in parallel.
 */
describe('attack: password-change requests as a way around the login limits', () => {
  let t: TestGateway;
  let mallory: { token: string; password: string };
  before(async () => {
    t = await startTestGateway('sqlite');
    mallory = await t.createUser('mallory');
  });
  after(() => t?.close());

  const changeFrom = (remoteAddress: string, oldPassword: string) =>
    t.gateway.http
      .inject({
        method: 'POST',
        url: '/v1/user/change-password',
        remoteAddress,
        headers: { authorization: `Bearer ${mallory.token}` },
        payload: { old_password: oldPassword, new_password: 'a-brand-new-password' },
      })
      .then((response) => ({ status: response.statusCode, body: response.json() }));

  it('a burst of wrong old passwords from one address is refused past the per-address bound, and logins go on', async () => {
    const victim = await t.createUser('victim');
    const burst = Promise.all(Array.from({ length: 24 }, (_, i) => changeFrom('10.9.0.1', `guess-${i}`)));
    // Someone else logs in meanwhile from elsewhere: the burst does not hold the shared checks.
    const login = await t.gateway.http.inject({
      method: 'POST',
      url: '/v1/auth/login',
      remoteAddress: '10.9.0.2',
      payload: { username: 'victim', password: victim.password },
    });
    assert.equal(login.statusCode, 200, login.body);
    const answers = await burst;
    const busy = answers.filter((a) => a.status === 429 && a.body.code === 'rate_limited');
    assert.ok(busy.length > 0, `no request of the burst was held back: ${answers.map((a) => a.status)}`);
    assert.ok(answers.every((a) => a.status === 400 || a.status === 429));
  });

  it('wrong old passwords count as failed logins: past the limit the right one is refused too, with Retry-After', async () => {
    let limited: { status: number; body: { code: string; error: string } } | null = null;
    for (let i = 0; i < 15 && !limited; i++) {
      const answer = await changeFrom('10.9.1.1', `wrong-${i}`);
      if (answer.status === 429) limited = answer;
      else assert.equal(answer.body.code, 'invalid_old_password');
    }
    assert.ok(limited, 'fifteen wrong old passwords in a row were all checked');
    assert.match(limited.body.error, /try again in \d+ seconds/);
    const right = await changeFrom('10.9.1.1', mallory.password);
    assert.equal(right.status, 429, 'the right old password is refused while the address is limited');
  });
});
