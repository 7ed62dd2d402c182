import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SignJWT } from 'jose';
import { assertError, assertEvent, eventsOf, ISO_UTC } from '../helpers/expect.js';
import { ADMIN_PASSWORD, DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const ANONYMOUS = { kind: 'anonymous', id: null, username: null };

for (const kind of DATABASES) {
  describe(`authentication (${kind})`, () => {
    let t: TestGateway;
    let admin: { kind: string; id: string; username: string };

    /** A login from a given client address (inject's default is 127.0.0.1). */
    const loginFrom = async (
      username: string,
      password: string,
      remoteAddress = '127.0.0.1',
      url = '/v1/auth/login',
    ) => {
      const response = await t.gateway.http.inject({
        method: 'POST',
        url,
        remoteAddress,
        payload: { username, password },
      });
      return { status: response.statusCode, body: response.json(), headers: response.headers };
    };
    const userKeys = (token: string | null) => t.request('GET', '/v1/user/ssh-keys', { token });
    const sign = (claims: Record<string, unknown>, secret = t.gateway.config.jwtSecret) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .sign(new TextEncoder().encode(secret));

    before(async () => {
      t = await startTestGateway(kind);
      const me = await t.request('GET', '/v1/admin/users');
      const row = me.body.users.find((u: any) => u.username === 'admin');
      admin = { kind: 'admin', id: row.id, username: 'admin' };
    });
    after(() => t.close());

    it('logs in on /v1/auth/login and the /v1/admin/login alias with {token, role, expires_at, user}', async () => {
      const alice = await t.createUser('alice', 'alice-password');
      for (const url of ['/v1/auth/login', '/v1/admin/login']) {
        const before = Date.now();
        const response = await t.request('POST', url, {
          token: null,
          body: { username: 'alice', password: 'alice-password' },
        });
        assert.equal(response.status, 200, JSON.stringify(response.body));
        assert.deepEqual(Object.keys(response.body).sort(), ['expires_at', 'role', 'token', 'user']);
        assert.equal(response.body.role, 'user');
        assert.deepEqual(response.body.user, { id: alice.id, username: 'alice', role: 'user' });
        assert.match(response.body.token, /^[\w-]+\.[\w-]+\.[\w-]+$/);
        assert.match(response.body.expires_at, ISO_UTC);
        // Default lifetime: 12 hours.
        const lifetime = Date.parse(response.body.expires_at) - before;
        assert.ok(Math.abs(lifetime - 12 * 3600_000) < 5_000, `lifetime ${lifetime}`);
        assert.equal((await userKeys(response.body.token)).status, 200);
      }
      const adminLogin = await t.request('POST', '/v1/admin/login', {
        token: null,
        body: { username: 'admin', password: ADMIN_PASSWORD },
      });
      assert.equal(adminLogin.status, 200);
      assert.equal(adminLogin.body.role, 'admin');
      assert.deepEqual(adminLogin.body.user, { id: admin.id, username: 'admin', role: 'admin' });
      const users = await t.request('GET', '/v1/admin/users', { token: adminLogin.body.token });
      assert.equal(users.status, 200);
      // 1 from createUser, 2 above.
      const succeeded = await assertEvent(
        t,
        { user_id: alice.id, type: 'auth.login.succeeded' },
        {
          kind: 'user',
          id: alice.id,
          username: 'alice',
        },
        3,
      );
      assert.equal(succeeded.data.username, 'alice');
      assert.equal(succeeded.data.client_address, '127.0.0.1');
    });

    it('answers an unknown user and a wrong password alike: 401 invalid_credentials, both logged', async () => {
      const bob = await t.createUser('bob', 'bob-password');
      const unknown = await t.request('POST', '/v1/auth/login', {
        token: null,
        body: { username: 'nobody-here', password: 'bob-password' },
      });
      const wrong = await t.request('POST', '/v1/admin/login', {
        token: null,
        body: { username: 'bob', password: 'not-the-password' },
      });
      assertError(unknown, 401, 'invalid_credentials');
      assertError(wrong, 401, 'invalid_credentials');
      assert.deepEqual(unknown.body, wrong.body);
      assert.equal(unknown.headers['www-authenticate'], wrong.headers['www-authenticate']);

      const failed = await assertEvent(t, { user_id: bob.id, type: 'auth.login.failed' }, ANONYMOUS);
      assert.equal(failed.level, 'warn');
      assert.deepEqual(failed.data, {
        username: 'bob',
        client_address: '127.0.0.1',
        reason: 'invalid_credentials',
      });
      const all = await eventsOf(t, { type: 'auth.login.failed' });
      const nobody = all.filter((e) => e.data.username === null);
      assert.equal(nobody.length, 1);
      assert.equal(nobody[0].user_id, null);
      assert.deepEqual(nobody[0].actor, ANONYMOUS);
      assert.match(nobody[0].message, /no account has the username given/);
      assert.doesNotMatch(JSON.stringify(all), /bob-password|not-the-password|nobody-here/);
    });

    it('never writes down a password typed into the username field (a name that is no account)', async () => {
      const typist = await t.createUser('typist', 'carols-secret-pass');
      // Tab pressed once too often: the password in the username field, then the password again.
      for (const url of ['/v1/auth/login', '/v1/admin/login'])
        await t.request('POST', url, {
          token: null,
          body: { username: 'carols-secret-pass', password: 'carols-secret-pass' },
        });
      const events = await t.request('GET', '/v1/admin/events?limit=500');
      assert.doesNotMatch(JSON.stringify(events.body), /carols-secret-pass/);
      assert.equal(typist.password, 'carols-secret-pass');
    });

    it('validates the login body: missing fields 400 validation_failed, malformed JSON 400', async () => {
      const missing = await t.request('POST', '/v1/auth/login', { token: null, body: { username: 'bob' } });
      assert.equal(assertError(missing, 400, 'validation_failed').details[0].field, 'password');
      const malformed = await t.request('POST', '/v1/auth/login', {
        token: null,
        body: '{"username": "bob", ',
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(malformed.status, 400);
      assert.match(String(malformed.headers['content-type']), /^application\/json/);
    });

    it('reports disabled and expired accounts with 403 only after a correct password', async () => {
      const carol = await t.createUser('carol', 'carol-password');
      assert.equal(
        (await t.request('PATCH', `/v1/admin/users/${carol.id}`, { body: { status: 'disabled' } })).status,
        200,
      );
      assertError(await loginFrom('carol', 'carol-password'), 403, 'account_disabled');
      assertError(await loginFrom('carol', 'wrong-password'), 401, 'invalid_credentials');
      const failures = await eventsOf(t, { user_id: carol.id, type: 'auth.login.failed' });
      assert.deepEqual(failures.map((e) => e.data.reason).sort(), [
        'account_disabled',
        'invalid_credentials',
      ]);
      assert.deepEqual(failures.find((e) => e.data.reason === 'account_disabled').actor, {
        kind: 'user',
        id: carol.id,
        username: 'carol',
      });

      assert.equal(
        (await t.request('PATCH', `/v1/admin/users/${carol.id}`, { body: { status: 'active' } })).status,
        200,
      );
      assert.equal((await loginFrom('carol', 'carol-password')).status, 200);

      const past = new Date(Date.now() - 60_000).toISOString();
      assert.equal(
        (await t.request('PUT', `/v1/admin/users/${carol.id}/expiry`, { body: { expires_at: past } })).status,
        200,
      );
      assertError(await loginFrom('carol', 'carol-password'), 403, 'account_expired');
      assertError(await loginFrom('carol', 'wrong-password'), 401, 'invalid_credentials');
      // Disabled and expired at once: still only revealed after the password.
      await t.request('PATCH', `/v1/admin/users/${carol.id}`, { body: { status: 'disabled' } });
      assertError(await loginFrom('carol', 'wrong-password'), 401, 'invalid_credentials');
      assert.equal((await loginFrom('carol', 'carol-password')).status, 403);
      await t.request('PATCH', `/v1/admin/users/${carol.id}`, { body: { status: 'active' } });

      const future = new Date(Date.now() + 3600_000).toISOString();
      await t.request('PUT', `/v1/admin/users/${carol.id}/expiry`, { body: { expires_at: future } });
      assert.equal((await loginFrom('carol', 'carol-password')).status, 200);
    });

    it('refuses the 11th failed login per (username, address) with 429 and Retry-After, even with the right password', async () => {
      const dave = await t.createUser('dave', 'dave-password');
      for (let i = 0; i < 10; i++) {
        assertError(await loginFrom(`dave`, `wrong-${i}`, '10.1.0.1'), 401, 'invalid_credentials');
      }
      for (const password of ['wrong-x', 'dave-password']) {
        const limited = await loginFrom('DAVE', password, '10.1.0.1', '/v1/admin/login');
        assertError(limited as any, 429, 'rate_limited');
        const retryAfter = Number(limited.headers['retry-after']);
        assert.ok(
          Number.isInteger(retryAfter) && retryAfter > 250 && retryAfter <= 300,
          `Retry-After ${retryAfter}`,
        );
        // What the dashboard shows: the wait in words, as SSH and the scripts say it.
        assert.equal(limited.body.error, `Too many failed attempts; try again in ${retryAfter} seconds`);
      }
      // Failures from one address never lock the account out of the others.
      assert.equal((await loginFrom('dave', 'dave-password', '10.1.0.201')).status, 200);
      const limitedEvents = await eventsOf(t, { type: 'auth.login.rate_limited' });
      // Named as the account is, whatever case was typed.
      assert.equal(limitedEvents.filter((e) => e.data.username === 'dave').length, 2);
      assert.equal((await eventsOf(t, { user_id: dave.id, type: 'auth.login.failed' })).length, 10);
    });

    it('refuses the 11th failed login per client address with 429, whatever the username', async () => {
      for (let i = 0; i < 10; i++) {
        assertError(await loginFrom(`ghost${i}`, 'wrong-password', '10.2.0.7'), 401, 'invalid_credentials');
      }
      const limited = await loginFrom('alice', 'alice-password', '10.2.0.7');
      assertError(limited as any, 429, 'rate_limited');
      assert.ok(Number(limited.headers['retry-after']) > 0);
      // The same account from another address still logs in.
      assert.equal((await loginFrom('alice', 'alice-password', '10.2.0.8')).status, 200);
    });

    it('keeps roles apart: admin token on /v1/user/* and user token on /v1/admin/* get 403 forbidden', async () => {
      const erin = await t.createUser('erin', 'erin-password');
      assertError(await userKeys(t.adminToken), 403, 'forbidden');
      assertError(
        await t.request('POST', '/v1/user/change-password', {
          body: { old_password: ADMIN_PASSWORD, new_password: 'something-new' },
        }),
        403,
        'forbidden',
      );
      for (const [method, url] of [
        ['GET', '/v1/admin/users'],
        ['GET', `/v1/admin/users/${erin.id}`],
        ['PATCH', `/v1/admin/users/${erin.id}`],
        ['POST', `/v1/admin/users/${erin.id}/rotate-password`],
        ['GET', '/v1/admin/events'],
      ] as const) {
        const body = method === 'PATCH' ? { status: 'disabled' } : undefined;
        assertError(await t.request(method, url, { token: erin.token, body }), 403, 'forbidden');
      }
      assert.equal((await t.request('GET', `/v1/admin/users/${erin.id}`)).body.status, 'active');
      // The admin still can log in with the unchanged password.
      assert.equal((await loginFrom('admin', ADMIN_PASSWORD)).status, 200);
    });

    it('answers no token, a garbage token, a foreign or expired token with 401 unauthorized', async () => {
      const frank = await t.createUser('frank', 'frank-password');
      const now = Math.floor(Date.now() / 1000);
      const claims = { sub: frank.id, role: 'user', ver: 0, iss: 'cloud-cli-proxy' };
      const tokens: Array<[string, string | null, Record<string, string>?]> = [
        ['no token', null],
        ['garbage', 'not-a-jwt'],
        ['tampered', `${frank.token.slice(0, -4)}AAAA`],
        ['other secret', await sign({ ...claims, iat: now, exp: now + 600 }, 'x'.repeat(48))],
        ['expired', await sign({ ...claims, iat: now - 7200, exp: now - 3600 })],
        ['wrong issuer', await sign({ ...claims, iss: 'someone-else', iat: now, exp: now + 600 })],
        [
          'unknown user',
          await sign({ ...claims, sub: '00000000-0000-4000-8000-000000000000', iat: now, exp: now + 600 }),
        ],
        ['forged role', await sign({ ...claims, role: 'admin', iat: now, exp: now + 600 })],
        [
          'unsigned',
          `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${Buffer.from(JSON.stringify({ ...claims, exp: now + 600 })).toString('base64url')}.`,
        ],
        ['basic scheme', null, { authorization: 'Basic YWRtaW46YWRtaW4=' }],
      ];
      for (const [name, token, headers] of tokens) {
        for (const url of ['/v1/user/ssh-keys', '/v1/admin/users']) {
          const response = await t.request('GET', url, { token, headers });
          assert.equal(response.status, 401, `${name} on ${url}: ${response.status}`);
          assertError(response, 401, 'unauthorized');
        }
      }
      // A token this gateway signed with valid claims is accepted, so the refusals above are about the token.
      const valid = await sign({ ...claims, iat: now, exp: now + 600 });
      assert.equal((await userKeys(valid)).status, 200);
      assert.equal((await userKeys(frank.token)).status, 200);
    });

    describe('revokes tokens at once', () => {
      it('when the user is disabled (and they stay revoked after re-enabling)', async () => {
        const u = await t.createUser('rev-disable');
        assert.equal((await userKeys(u.token)).status, 200);
        await t.request('PATCH', `/v1/admin/users/${u.id}`, { body: { status: 'disabled' } });
        assertError(await userKeys(u.token), 401, 'unauthorized');
        await t.request('PATCH', `/v1/admin/users/${u.id}`, { body: { status: 'active' } });
        assertError(await userKeys(u.token), 401, 'unauthorized');
        assert.equal((await userKeys(await t.login('rev-disable', u.password))).status, 200);
      });

      it('when the expiry is moved into the past', async () => {
        const u = await t.createUser('rev-expire');
        const past = new Date(Date.now() - 1000).toISOString();
        await t.request('PUT', `/v1/admin/users/${u.id}/expiry`, { body: { expires_at: past } });
        assertError(await userKeys(u.token), 401, 'unauthorized');
        await t.request('PUT', `/v1/admin/users/${u.id}/expiry`, { body: { expires_at: null } });
        assert.equal((await userKeys(await t.login('rev-expire', u.password))).status, 200);
      });

      it('when the user is deleted', async () => {
        const u = await t.createUser('rev-delete');
        assert.equal((await t.request('DELETE', `/v1/admin/users/${u.id}`)).status, 204);
        assertError(await userKeys(u.token), 401, 'unauthorized');
        assertError(await loginFrom('rev-delete', u.password, '10.3.0.1'), 401, 'invalid_credentials');
      });

      it('when an admin rotates the password', async () => {
        const u = await t.createUser('rev-rotate');
        const second = await t.login('rev-rotate', u.password);
        const rotated = await t.request('POST', `/v1/admin/users/${u.id}/rotate-password`);
        assert.equal(rotated.status, 200);
        assertError(await userKeys(u.token), 401, 'unauthorized');
        assertError(await userKeys(second), 401, 'unauthorized');
        assert.equal((await userKeys(await t.login('rev-rotate', rotated.body.new_password))).status, 200);
      });

      it('when the user changes their own password', async () => {
        const u = await t.createUser('rev-change');
        const other = await t.login('rev-change', u.password);
        const changed = await t.request('POST', '/v1/user/change-password', {
          token: u.token,
          body: { old_password: u.password, new_password: 'brand-new-password' },
        });
        assert.equal(changed.status, 200);
        assertError(await userKeys(u.token), 401, 'unauthorized');
        assertError(await userKeys(other), 401, 'unauthorized');
        assert.equal((await userKeys(await t.login('rev-change', 'brand-new-password'))).status, 200);
      });

      it('but not when the admin only regenerates SSH credentials or the user adds a key', async () => {
        const u = await t.createUser('rev-keep');
        assert.equal((await t.request('POST', `/v1/admin/users/${u.id}/credentials/regenerate`)).status, 200);
        assert.equal((await t.request('POST', '/v1/user/ssh-keys/generate', { token: u.token })).status, 201);
        assert.equal((await userKeys(u.token)).status, 200);
      });
    });

    it('logs the login events with the acting admin for account changes', async () => {
      const u = await t.createUser('evt-login');
      await assertEvent(t, { user_id: u.id, type: 'user.created' }, admin);
      await assertEvent(
        t,
        { user_id: u.id, type: 'auth.login.succeeded' },
        { kind: 'user', id: u.id, username: 'evt-login' },
      );
    });
  });
}
