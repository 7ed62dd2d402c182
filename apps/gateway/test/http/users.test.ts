import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { assertError, assertEvent, assertValidation, eventsOf, ISO_UTC, UUID } from '../helpers/expect.js';
import { ADMIN_PASSWORD, DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const USER_KEYS = [
  'created_at',
  'expired',
  'expires_at',
  'id',
  'role',
  'short_id',
  'status',
  'updated_at',
  'username',
];
const ALNUM_20 = /^[A-Za-z0-9]{20}$/;
const NO_SUCH_USER = '00000000-0000-4000-8000-000000000000';

for (const kind of DATABASES) {
  describe(`admin: users (${kind})`, () => {
    let t: TestGateway;
    let admin: { kind: string; id: string; username: string };

    const loginStatus = async (username: string, password: string) =>
      (await t.request('POST', '/v1/auth/login', { token: null, body: { username, password } })).status;
    const create = (body: unknown) => t.request('POST', '/v1/admin/users', { body });

    before(async () => {
      t = await startTestGateway(kind);
      const users = await t.request('GET', '/v1/admin/users');
      admin = { kind: 'admin', id: users.body.users[0].id, username: 'admin' };
    });
    after(() => t.close());

    it('creates a user: 201 with the user object and ssh_credentials, logged with the acting admin', async () => {
      const before = new Date().toISOString();
      const response = await create({ username: 'Alice.Smith-1', password: 'alice-password' });
      assert.equal(response.status, 201, JSON.stringify(response.body));
      const { ssh_credentials, ...user } = response.body;
      assert.deepEqual(Object.keys(user).sort(), USER_KEYS);
      assert.match(user.id, UUID);
      assert.equal(user.username, 'Alice.Smith-1');
      assert.equal(user.role, 'user');
      assert.equal(user.status, 'active');
      assert.equal(user.expired, false);
      assert.equal(user.expires_at, null);
      assert.match(user.short_id, /^[a-hjkmnp-z2-9]{8}$/);
      assert.match(user.created_at, ISO_UTC);
      assert.match(user.updated_at, ISO_UTC);
      assert.ok(user.created_at.replace('Z', '') >= before.slice(0, 19));
      assert.deepEqual(Object.keys(ssh_credentials).sort(), ['ssh_pass', 'ssh_user']);
      assert.equal(ssh_credentials.ssh_user, 'Alice.Smith-1');
      assert.match(ssh_credentials.ssh_pass, ALNUM_20);
      assert.equal(await loginStatus('Alice.Smith-1', 'alice-password'), 200);

      const event = await assertEvent(t, { user_id: user.id, type: 'user.created' }, admin);
      assert.equal(event.data.username, 'Alice.Smith-1');
      assert.equal(event.data.role, 'user');
      assert.doesNotMatch(JSON.stringify(event), /alice-password/);
      assert.ok(!JSON.stringify(event).includes(ssh_credentials.ssh_pass));
    });

    it('accepts usernames of exactly 3 and 50 characters and an expiry with an offset, stored in UTC', async () => {
      const three = await create({ username: 'abc', password: '12345678' });
      assert.equal(three.status, 201, JSON.stringify(three.body));
      const fifty = 'u'.repeat(50);
      const long = await create({
        username: fifty,
        password: '12345678',
        expires_at: '2031-05-06T12:30:00+02:00',
      });
      assert.equal(long.status, 201, JSON.stringify(long.body));
      assert.equal(long.body.username, fifty);
      assert.equal(long.body.expires_at, '2031-05-06T10:30:00Z');
      assert.equal(
        (await t.request('GET', `/v1/admin/users/${long.body.id}`)).body.expires_at,
        '2031-05-06T10:30:00Z',
      );
      const none = await create({ username: 'null-expiry', password: '12345678', expires_at: null });
      assert.equal(none.status, 201);
      assert.equal(none.body.expires_at, null);
    });

    it('makes the first admin once when gateways start together on an empty database', async () => {
      const made = await Promise.all([
        t.gateway.users.ensureAdmin('together', 'together-password'),
        t.gateway.users.ensureAdmin('together', 'together-password'),
      ]);
      assert.deepEqual(made.sort(), ['created', 'exists']);
      const together = (await t.request('GET', '/v1/admin/users')).body.users.filter(
        (user: { username: string }) => user.username === 'together',
      );
      assert.equal(together.length, 1);
      // The other tests count on one admin.
      assert.equal((await t.request('DELETE', `/v1/admin/users/${together[0].id}`)).status, 204);
    });

    it('refuses a duplicate username, also in another case: 409 username_taken', async () => {
      const first = await create({ username: 'dupe', password: 'dupe-password' });
      assert.equal(first.status, 201);
      for (const username of ['dupe', 'DUPE', 'Dupe']) {
        const again = await create({ username, password: 'other-password' });
        assertError(again, 409, 'username_taken');
      }
      const list = await t.request('GET', '/v1/admin/users');
      assert.equal(list.body.users.filter((u: any) => u.username.toLowerCase() === 'dupe').length, 1);
      // The first account's password is unchanged.
      assert.equal(await loginStatus('dupe', 'dupe-password'), 200);
      assert.equal(await loginStatus('dupe', 'other-password'), 401);
    });

    it('validates the body: 400 validation_failed with details naming each bad field', async () => {
      const cases: Array<[unknown, string[]]> = [
        [{ username: 'ab', password: 'long-enough' }, ['username']],
        [{ username: 'x'.repeat(51), password: 'long-enough' }, ['username']],
        [{ username: 'has space', password: 'long-enough' }, ['username']],
        [{ username: '-leading', password: 'long-enough' }, ['username']],
        [{ username: 'semi;colon', password: 'long-enough' }, ['username']],
        [{ username: 'ünïcode', password: 'long-enough' }, ['username']],
        [{ username: 'okname', password: '1234567' }, ['password']],
        [{ username: 'okname', password: 'long-enough', expires_at: 'tomorrow' }, ['expires_at']],
        [{ username: 'okname', password: 'long-enough', expires_at: '2030-01-01' }, ['expires_at']],
        [{ username: 'okname', password: 'long-enough', expires_at: '2030-01-01T00:00:00' }, ['expires_at']],
        [{ username: 'okname', password: 'long-enough', expires_at: '2030-02-30T00:00:00Z' }, ['expires_at']],
        [
          { username: 'okname', password: 'long-enough', expires_at: '9999-12-31T23:00:00-05:00' },
          ['expires_at'],
        ],
        [{}, ['password', 'username']],
        [{ username: 'ab', password: 'short', expires_at: 'nope' }, ['expires_at', 'password', 'username']],
      ];
      for (const [body, fields] of cases) {
        const response = await create(body);
        assert.equal(response.status, 400, `${JSON.stringify(body)} -> ${response.status}`);
        assertValidation(response, fields);
      }
      const list = await t.request('GET', '/v1/admin/users');
      assert.ok(!list.body.users.some((u: any) => u.username === 'okname'));
    });

    it('strips unknown fields instead of storing them', async () => {
      const response = await create({
        username: 'sneaky',
        password: 'sneaky-password',
        role: 'admin',
        status: 'disabled',
        id: NO_SUCH_USER,
        short_id: 'aaaaaaaa',
        password_hash: 'scrypt$x',
      });
      assert.equal(response.status, 201, JSON.stringify(response.body));
      assert.equal(response.body.role, 'user');
      assert.equal(response.body.status, 'active');
      assert.notEqual(response.body.id, NO_SUCH_USER);
      assert.notEqual(response.body.short_id, 'aaaaaaaa');
      assert.equal(await loginStatus('sneaky', 'sneaky-password'), 200);
      const patched = await t.request('PATCH', `/v1/admin/users/${response.body.id}`, {
        body: { status: 'active', role: 'admin', username: 'renamed' },
      });
      assert.equal(patched.status, 200);
      assert.equal(patched.body.role, 'user');
      assert.equal(patched.body.username, 'sneaky');
    });

    it('answers a malformed JSON body with 400, a non-JSON one with 4xx and a body over 1 MiB with 413', async () => {
      const json = { 'content-type': 'application/json' };
      const malformed = await t.request('POST', '/v1/admin/users', {
        body: '{"username": "x",',
        headers: json,
      });
      assertError(malformed, 400, 'invalid_json');
      assertValidation(await t.request('POST', '/v1/admin/users', { body: '[1, 2]', headers: json }), [
        '(body)',
      ]);
      const big = JSON.stringify({ username: 'biggie', password: 'x'.repeat(1024 * 1024 + 10) });
      assertError(
        await t.request('POST', '/v1/admin/users', { body: big, headers: json }),
        413,
        'payload_too_large',
      );
      const form = await t.request('POST', '/v1/admin/users', {
        body: 'username=formy&password=12345678',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      assertError(form, 415, 'unsupported_media_type');
      const text = await t.request('POST', '/v1/admin/users', {
        body: '{"username":"texty","password":"12345678"}',
        headers: { 'content-type': 'text/plain' },
      });
      assertError(text, 415, 'unsupported_media_type');
      const list = await t.request('GET', '/v1/admin/users');
      assert.ok(!list.body.users.some((u: any) => ['biggie', 'formy', 'texty'].includes(u.username)));
    });

    it('lists users newest first and gets one user with the same object, without secrets', async () => {
      const a = await t.createUser('list-a');
      const b = await t.createUser('list-b');
      const list = await t.request('GET', '/v1/admin/users');
      assert.equal(list.status, 200);
      assert.deepEqual(Object.keys(list.body), ['users']);
      const names = list.body.users.map((u: any) => u.username);
      assert.ok(names.indexOf('list-b') < names.indexOf('list-a'), names.join(','));
      assert.equal(names.at(-1), 'admin');
      for (const user of list.body.users) assert.deepEqual(Object.keys(user).sort(), USER_KEYS);
      const serialised = JSON.stringify(list.body);
      for (const secret of [a.password, b.password, a.sshPass, b.sshPass, ADMIN_PASSWORD, 'scrypt']) {
        assert.ok(!serialised.includes(secret), `list leaks ${secret}`);
      }
      const got = await t.request('GET', `/v1/admin/users/${b.id}`);
      assert.equal(got.status, 200);
      assert.deepEqual(
        got.body,
        list.body.users.find((u: any) => u.id === b.id),
      );
      assert.ok(!JSON.stringify(got.body).includes(b.sshPass));
    });

    it('answers unknown and malformed user ids with 404 not_found on every user route', async () => {
      const routes: Array<[string, string, unknown?]> = [
        ['GET', ''],
        ['PATCH', '', { status: 'disabled' }],
        ['DELETE', ''],
        ['POST', '/rotate-password'],
        ['PUT', '/expiry', { expires_at: null }],
        ['POST', '/credentials/regenerate'],
        ['GET', '/ssh-keys'],
        ['POST', '/ssh-keys/generate'],
        ['DELETE', `/ssh-keys/${NO_SUCH_USER}`],
      ];
      for (const id of [NO_SUCH_USER, 'not-a-uuid', '123', "1'; drop table users; --"]) {
        for (const [method, suffix, body] of routes) {
          const response = await t.request(method, `/v1/admin/users/${encodeURIComponent(id)}${suffix}`, {
            body,
          });
          assertError(response, 404, 'not_found');
        }
      }
      assert.equal((await t.request('GET', '/v1/admin/users')).status, 200);
    });

    it('disables and enables a user with PATCH, validating the status, logging both', async () => {
      const u = await t.createUser('patchy');
      const disabled = await t.request('PATCH', `/v1/admin/users/${u.id}`, { body: { status: 'disabled' } });
      assert.equal(disabled.status, 200);
      assert.deepEqual(Object.keys(disabled.body).sort(), USER_KEYS);
      assert.equal(disabled.body.status, 'disabled');
      assert.ok(Date.parse(disabled.body.updated_at) >= Date.parse(disabled.body.created_at));
      assert.equal((await t.request('GET', `/v1/admin/users/${u.id}`)).body.status, 'disabled');
      assert.equal(await loginStatus('patchy', u.password), 403);
      const enabled = await t.request('PATCH', `/v1/admin/users/${u.id}`, { body: { status: 'active' } });
      assert.equal(enabled.body.status, 'active');
      assert.equal(await loginStatus('patchy', u.password), 200);
      for (const body of [{ status: 'paused' }, {}, { status: null }]) {
        assertValidation(await t.request('PATCH', `/v1/admin/users/${u.id}`, { body }), ['status']);
      }
      await assertEvent(t, { user_id: u.id, type: 'user.disabled' }, admin);
      const event = await assertEvent(t, { user_id: u.id, type: 'user.enabled' }, admin);
      assert.deepEqual(event.data, { username: 'patchy', status: 'active' });
    });

    it('deletes a user: 204 with no body, then 404, the login gone and the events kept', async () => {
      const u = await t.createUser('doomed');
      const deleted = await t.request('DELETE', `/v1/admin/users/${u.id}`);
      assert.equal(deleted.status, 204);
      assert.equal(deleted.body, '');
      assertError(await t.request('GET', `/v1/admin/users/${u.id}`), 404, 'not_found');
      assertError(await t.request('DELETE', `/v1/admin/users/${u.id}`), 404, 'not_found');
      assert.ok(!(await t.request('GET', '/v1/admin/users')).body.users.some((x: any) => x.id === u.id));
      assert.equal(await loginStatus('doomed', u.password), 401);
      await assertEvent(t, { user_id: u.id, type: 'user.deleted' }, admin);
      await assertEvent(t, { user_id: u.id, type: 'user.created' }, admin);
      // The name is free again.
      const again = await create({ username: 'doomed', password: 'new-doomed-password' });
      assert.equal(again.status, 201);
      assert.notEqual(again.body.id, u.id);
    });

    it('never disables, expires or deletes the last active admin (409 last_admin), but can once a second exists', async () => {
      const url = `/v1/admin/users/${admin.id}`;
      const past = new Date(Date.now() - 1000).toISOString();
      assertError(await t.request('PATCH', url, { body: { status: 'disabled' } }), 409, 'last_admin');
      assertError(await t.request('DELETE', url), 409, 'last_admin');
      assertError(await t.request('PUT', `${url}/expiry`, { body: { expires_at: past } }), 409, 'last_admin');
      // An expired second admin does not count as active.
      const expiredAdmin = await t.gateway.users.create(
        { username: 'admin-expired', password: 'admin-expired-pw', role: 'admin', expires_at: past },
        { kind: 'system', id: null, username: null },
      );
      assert.equal(expiredAdmin.role, 'admin');
      assertError(await t.request('PATCH', url, { body: { status: 'disabled' } }), 409, 'last_admin');
      assert.equal((await t.request('GET', url)).body.status, 'active');

      const second = await t.gateway.users.create(
        { username: 'admin2', password: 'admin2-password' },
        { kind: 'system', id: null, username: null },
      );
      assert.equal(second.role, 'user', 'role defaults to user');
      await t.request('DELETE', `/v1/admin/users/${second.id}`);
      const admin2 = await t.gateway.users.create(
        { username: 'admin2', password: 'admin2-password', role: 'admin' },
        { kind: 'system', id: null, username: null },
      );
      const login = await t.request('POST', '/v1/auth/login', {
        token: null,
        body: { username: 'admin2', password: 'admin2-password' },
      });
      assert.equal(login.body.role, 'admin');
      const token2 = login.body.token;

      // Two active admins: either may be disabled. admin2 disables the first admin, then re-enables it.
      const disabled = await t.request('PATCH', url, { token: token2, body: { status: 'disabled' } });
      assert.equal(disabled.status, 200, JSON.stringify(disabled.body));
      assertError(
        await t.request('PATCH', `/v1/admin/users/${admin2.id}`, {
          token: token2,
          body: { status: 'disabled' },
        }),
        409,
        'last_admin',
      );
      assertError(
        await t.request('DELETE', `/v1/admin/users/${admin2.id}`, { token: token2 }),
        409,
        'last_admin',
      );
      assert.equal(
        (await t.request('PATCH', url, { token: token2, body: { status: 'active' } })).status,
        200,
      );
      t.adminToken = await t.login('admin', ADMIN_PASSWORD);

      // Back to two active admins: admin2 can be deleted, after which the first is the last again.
      assert.equal((await t.request('DELETE', `/v1/admin/users/${admin2.id}`)).status, 204);
      assertError(await t.request('PATCH', url, { body: { status: 'disabled' } }), 409, 'last_admin');
      // A disabled admin is not the last active one: it can be deleted.
      const admin3 = await t.gateway.users.create(
        { username: 'admin3', password: 'admin3-password', role: 'admin' },
        { kind: 'system', id: null, username: null },
      );
      assert.equal(
        (await t.request('PATCH', `/v1/admin/users/${admin3.id}`, { body: { status: 'disabled' } })).status,
        200,
      );
      assertError(await t.request('DELETE', url), 409, 'last_admin');
      assert.equal((await t.request('DELETE', `/v1/admin/users/${admin3.id}`)).status, 204);
      assert.equal((await t.request('DELETE', `/v1/admin/users/${expiredAdmin.id}`)).status, 204);
      assert.equal((await t.request('GET', url)).body.status, 'active');
    });

    it('rotates a password: 200 {new_password} of 20 letters and digits that works while the old fails', async () => {
      const u = await t.createUser('rotor');
      const first = await t.request('POST', `/v1/admin/users/${u.id}/rotate-password`);
      assert.equal(first.status, 200);
      assert.deepEqual(Object.keys(first.body), ['new_password']);
      assert.match(first.body.new_password, ALNUM_20);
      assert.equal(await loginStatus('rotor', u.password), 401);
      assert.equal(await loginStatus('rotor', first.body.new_password), 200);
      const second = await t.request('POST', `/v1/admin/users/${u.id}/rotate-password`, { body: {} });
      assert.equal(second.status, 200);
      assert.notEqual(second.body.new_password, first.body.new_password);
      assert.equal(await loginStatus('rotor', first.body.new_password), 401);
      assert.equal(await loginStatus('rotor', second.body.new_password), 200);
      await assertEvent(t, { user_id: u.id, type: 'user.password_rotated' }, admin, 2);
      const all = JSON.stringify(await eventsOf(t, { user_id: u.id }));
      assert.ok(!all.includes(first.body.new_password) && !all.includes(second.body.new_password));
    });

    it('sets the expiry: offsets normalised to UTC Z, null clears, past expires at once, future restores', async () => {
      const u = await t.createUser('expiring');
      const url = `/v1/admin/users/${u.id}/expiry`;
      const offset = await t.request('PUT', url, { body: { expires_at: '2031-01-02T03:04:05+05:30' } });
      assert.equal(offset.status, 200, JSON.stringify(offset.body));
      assert.deepEqual(Object.keys(offset.body).sort(), USER_KEYS);
      assert.equal(offset.body.expires_at, '2031-01-01T21:34:05Z');
      assert.equal(offset.body.expired, false);
      const fraction = await t.request('PUT', url, { body: { expires_at: '2031-01-02T03:04:05.250-01:00' } });
      assert.equal(fraction.body.expires_at, '2031-01-02T04:04:05.250Z');
      const leap = await t.request('PUT', url, { body: { expires_at: '2030-06-30T23:59:60Z' } });
      assert.equal(leap.status, 200, JSON.stringify(leap.body));
      assert.equal(leap.body.expires_at, '2030-07-01T00:00:00Z');

      const cleared = await t.request('PUT', url, { body: { expires_at: null } });
      assert.equal(cleared.status, 200);
      assert.equal(cleared.body.expires_at, null);
      assert.equal((await t.request('GET', `/v1/admin/users/${u.id}`)).body.expires_at, null);

      const pastText = new Date(Date.now() - 3600_000).toISOString();
      const past = await t.request('PUT', url, { body: { expires_at: pastText } });
      assert.equal(past.status, 200);
      assert.equal(past.body.expired, true);
      assert.equal(past.body.status, 'active');
      assertError(
        await t.request('POST', '/v1/auth/login', {
          token: null,
          body: { username: 'expiring', password: u.password },
        }),
        403,
        'account_expired',
      );
      assertError(await t.request('GET', '/v1/user/ssh-keys', { token: u.token }), 401, 'unauthorized');
      const listed = (await t.request('GET', '/v1/admin/users')).body.users.find((x: any) => x.id === u.id);
      assert.equal(listed.expired, true);

      const future = await t.request('PUT', url, {
        body: { expires_at: new Date(Date.now() + 3600_000).toISOString() },
      });
      assert.equal(future.body.expired, false);
      assert.equal(await loginStatus('expiring', u.password), 200);

      for (const body of [
        { expires_at: 'next week' },
        { expires_at: 12345 },
        {},
        { expires_at: '2030-13-01T00:00:00Z' },
      ]) {
        assertValidation(await t.request('PUT', url, { body }), ['expires_at']);
      }
      const events = await eventsOf(t, { user_id: u.id, type: 'user.expiry_changed' });
      assert.equal(events.length, 6);
      for (const event of events) assert.deepEqual(event.actor, admin);
      assert.equal(events.at(-1).data.expires_at, '2031-01-01T21:34:05.000Z');
      assert.equal(events[2].data.expires_at, null);
    });

    it('regenerates SSH credentials: 200 {ssh_user, ssh_pass} with a new password, logged without it', async () => {
      const created = await create({ username: 'sshy', password: 'sshy-password' });
      const before = created.body.ssh_credentials;
      const response = await t.request('POST', `/v1/admin/users/${created.body.id}/credentials/regenerate`);
      assert.equal(response.status, 200);
      assert.deepEqual(Object.keys(response.body).sort(), ['ssh_pass', 'ssh_user']);
      assert.equal(response.body.ssh_user, before.ssh_user);
      assert.match(response.body.ssh_pass, ALNUM_20);
      assert.notEqual(response.body.ssh_pass, before.ssh_pass);
      // The stored SSH password (what the SSH proxy and entry auth check) is the new one.
      assert.deepEqual(await t.gateway.users.sshCredentials(created.body.id), response.body);
      // The login password is untouched.
      assert.equal(await loginStatus('sshy', 'sshy-password'), 200);
      const event = await assertEvent(
        t,
        { user_id: created.body.id, type: 'user.ssh_credentials_regenerated' },
        admin,
      );
      assert.ok(!JSON.stringify(event).includes(response.body.ssh_pass));
    });
  });
}
