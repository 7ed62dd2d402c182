import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { assertError, assertEvent, assertValidation, eventsOf } from '../helpers/expect.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

for (const kind of DATABASES) {
  describe(`user portal: password (${kind})`, () => {
    let t: TestGateway;
    before(async () => {
      t = await startTestGateway(kind);
    });
    after(() => t.close());

    const change = (token: string | null, body: unknown) =>
      t.request('POST', '/v1/user/change-password', { token, body });
    const loginStatus = async (username: string, password: string) =>
      (await t.request('POST', '/v1/auth/login', { token: null, body: { username, password } })).status;

    it('refuses a wrong old password with 400 invalid_old_password, changing nothing', async () => {
      const u = await t.createUser('walt', 'walt-password');
      const response = await change(u.token, {
        old_password: 'not-my-password',
        new_password: 'new-walt-password',
      });
      const body = assertError(response, 400, 'invalid_old_password');
      assert.deepEqual(body.details, [{ field: 'old_password', message: 'is not correct' }]);
      assert.equal(await loginStatus('walt', 'walt-password'), 200);
      assert.equal(await loginStatus('walt', 'new-walt-password'), 401);
      // The session is not ended by a failed attempt.
      assert.equal((await t.request('GET', '/v1/user/ssh-keys', { token: u.token })).status, 200);
      const event = await assertEvent(
        t,
        { user_id: u.id, type: 'user.password_change_failed' },
        {
          kind: 'user',
          id: u.id,
          username: 'walt',
        },
      );
      assert.equal(event.level, 'warn');
      assert.equal((await eventsOf(t, { user_id: u.id, type: 'user.password_changed' })).length, 0);
    });

    it('validates the body: a new password under 8 characters, missing fields', async () => {
      const u = await t.createUser('vera', 'vera-password');
      assertValidation(await change(u.token, { old_password: 'vera-password', new_password: '1234567' }), [
        'new_password',
      ]);
      assertValidation(await change(u.token, {}), ['new_password', 'old_password']);
      assertValidation(await change(u.token, { old_password: '', new_password: 'long-enough' }), [
        'old_password',
      ]);
      assertError(
        await t.request('POST', '/v1/user/change-password', {
          token: u.token,
          body: '{"old_password":',
          headers: { 'content-type': 'application/json' },
        }),
        400,
        'invalid_json',
      );
      assert.equal(await loginStatus('vera', 'vera-password'), 200);
    });

    it('changes the password: 200 {}, the new one logs in, the old one and old tokens stop working', async () => {
      const u = await t.createUser('carl', 'carl-password');
      const response = await change(u.token, {
        old_password: 'carl-password',
        new_password: 'carl-new-password',
        role: 'admin',
      });
      assert.equal(response.status, 200, JSON.stringify(response.body));
      assert.deepEqual(response.body, {});
      assert.equal(await loginStatus('carl', 'carl-password'), 401);
      const login = await t.request('POST', '/v1/auth/login', {
        token: null,
        body: { username: 'carl', password: 'carl-new-password' },
      });
      assert.equal(login.status, 200);
      assert.equal(login.body.role, 'user');
      assertError(await t.request('GET', '/v1/user/ssh-keys', { token: u.token }), 401, 'unauthorized');
      assertError(
        await change(u.token, { old_password: 'carl-new-password', new_password: 'x'.repeat(12) }),
        401,
        'unauthorized',
      );
      assert.equal((await t.request('GET', '/v1/user/ssh-keys', { token: login.body.token })).status, 200);

      const event = await assertEvent(
        t,
        { user_id: u.id, type: 'user.password_changed' },
        {
          kind: 'user',
          id: u.id,
          username: 'carl',
        },
      );
      assert.ok(!JSON.stringify(event).includes('carl-new-password'));
      // The user's own change does not touch the user record's visible fields other than updated_at.
      const got = await t.request('GET', `/v1/admin/users/${u.id}`);
      assert.equal(got.body.status, 'active');
      assert.equal(got.body.role, 'user');
    });

    it('needs a user token: none is 401, an admin token is 403', async () => {
      assertError(
        await change(null, { old_password: 'x', new_password: 'long-enough' }),
        401,
        'unauthorized',
      );
      assertError(
        await change(t.adminToken, { old_password: 'x', new_password: 'long-enough' }),
        403,
        'forbidden',
      );
    });
  });
}
