import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { needs } from '../../../../test/support/needs.js';
import { assertError, eventsOf, UUID } from '../helpers/expect.js';
import { KeyFactory } from '../helpers/ssh-keygen.js';
import { ADMIN_PASSWORD, DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const keys = new KeyFactory();
after(() => keys.cleanup());

/** The part of a private key file that is secret: every base64 line between the armour lines. */
const privateLines = (privateKey: string) =>
  privateKey.split('\n').filter((l) => l && !l.startsWith('-----'));

for (const kind of DATABASES) {
  describe(`audit trail and secrets (${kind})`, { skip: needs('ssh-keygen') }, () => {
    let t: TestGateway;
    let adminId: string;
    before(async () => {
      t = await startTestGateway(kind);
      adminId = (await t.request('GET', '/v1/admin/users')).body.users[0].id;
    });
    after(() => t.close());

    it('logs every account mutation and login with its actor and ids, and never a secret', async () => {
      const admin = { kind: 'admin', id: adminId, username: 'admin' };
      const secrets: string[] = [ADMIN_PASSWORD, 'scrypt$'];
      const ok = (response: { status: number; body: any }, status: number) => {
        assert.equal(response.status, status, JSON.stringify(response.body));
        return response.body;
      };
      const login = (password: string) =>
        t.request('POST', '/v1/auth/login', { token: null, body: { username: 'audited', password } });

      const created = ok(
        await t.request('POST', '/v1/admin/users', {
          body: { username: 'audited', password: 'first-password' },
        }),
        201,
      );
      const id: string = created.id;
      const me = { kind: 'user', id, username: 'audited' };
      secrets.push('first-password', created.ssh_credentials.ssh_pass);

      assertError(await login('wrong-password'), 401, 'invalid_credentials');
      let token = ok(await login('first-password'), 200).token;
      secrets.push(token);
      ok(await t.request('PATCH', `/v1/admin/users/${id}`, { body: { status: 'disabled' } }), 200);
      assertError(await login('first-password'), 403, 'account_disabled');
      ok(await t.request('PATCH', `/v1/admin/users/${id}`, { body: { status: 'active' } }), 200);
      ok(
        await t.request('PUT', `/v1/admin/users/${id}/expiry`, {
          body: { expires_at: '2040-01-01T00:00:00Z' },
        }),
        200,
      );
      const rotated = ok(await t.request('POST', `/v1/admin/users/${id}/rotate-password`), 200).new_password;
      secrets.push(rotated);
      const regenerated = ok(
        await t.request('POST', `/v1/admin/users/${id}/credentials/regenerate`),
        200,
      ).ssh_pass;
      secrets.push(regenerated);
      const added = ok(
        await t.request('POST', `/v1/admin/users/${id}/ssh-keys`, {
          body: { public_key: keys.generate('ed25519').publicKey },
        }),
        201,
      );
      const generated = ok(await t.request('POST', `/v1/admin/users/${id}/ssh-keys/generate`), 201);
      secrets.push(...privateLines(generated.private_key));
      ok(await t.request('DELETE', `/v1/admin/users/${id}/ssh-keys/${added.id}`), 204);

      token = ok(await login(rotated), 200).token;
      secrets.push(token);
      assertError(
        await t.request('POST', '/v1/user/change-password', {
          token,
          body: { old_password: 'not-it', new_password: 'third-password' },
        }),
        400,
        'invalid_old_password',
      );
      ok(
        await t.request('POST', '/v1/user/change-password', {
          token,
          body: { old_password: rotated, new_password: 'third-password' },
        }),
        200,
      );
      secrets.push('third-password');
      token = ok(await login('third-password'), 200).token;
      secrets.push(token);
      const own = ok(await t.request('POST', '/v1/user/ssh-keys/generate', { token }), 201);
      secrets.push(...privateLines(own.private_key));
      const ownAdded = ok(
        await t.request('POST', '/v1/user/ssh-keys', {
          token,
          body: { public_key: keys.generate('ecdsa', 256).publicKey },
        }),
        201,
      );
      ok(await t.request('DELETE', `/v1/user/ssh-keys/${ownAdded.id}`, { token }), 204);

      // Secrets appear in no later response: the user, the list, the keys.
      const responses = [
        await t.request('GET', '/v1/admin/users'),
        await t.request('GET', `/v1/admin/users/${id}`),
        await t.request('GET', `/v1/admin/users/${id}/ssh-keys`),
        await t.request('GET', '/v1/user/ssh-keys', { token }),
      ];
      for (const response of responses) {
        assert.equal(response.status, 200);
        const text = JSON.stringify(response.body);
        for (const secret of secrets.slice(0, -1))
          assert.ok(!text.includes(secret), `response leaks ${secret}`);
        assert.doesNotMatch(text, /password|hash|ssh_pass|private/i);
      }

      ok(await t.request('DELETE', `/v1/admin/users/${id}`), 204);

      const expected: Array<[string, object]> = [
        ['user.created', admin],
        ['auth.login.failed', { kind: 'anonymous', id: null, username: null }],
        ['auth.login.succeeded', me],
        ['user.disabled', admin],
        ['auth.login.failed', me],
        ['user.enabled', admin],
        ['user.expiry_changed', admin],
        ['user.password_rotated', admin],
        ['user.ssh_credentials_regenerated', admin],
        ['user.ssh_key.added', admin],
        ['user.ssh_key.generated', admin],
        ['user.ssh_key.deleted', admin],
        ['auth.login.succeeded', me],
        ['user.password_change_failed', me],
        ['user.password_changed', me],
        ['auth.login.succeeded', me],
        ['user.ssh_key.generated', me],
        ['user.ssh_key.added', me],
        ['user.ssh_key.deleted', me],
        ['user.deleted', admin],
      ];
      // The log outlives the user; oldest last.
      const events = (await eventsOf(t, { user_id: id })).reverse();
      assert.deepEqual(
        events.map((e) => [e.type, e.actor]),
        expected,
      );
      for (const event of events) {
        assert.match(event.id, UUID);
        assert.equal(event.user_id, id);
        assert.equal(typeof event.message, 'string');
        assert.ok(['info', 'warn'].includes(event.level));
      }
      assert.equal(new Set(events.map((e) => e.id)).size, events.length);
      const keyEvents = events.filter((e) => e.type.startsWith('user.ssh_key.'));
      assert.deepEqual(
        keyEvents.map((e) => e.data.key_id),
        [added.id, generated.id, added.id, own.id, ownAdded.id, ownAdded.id],
      );

      // Filters combine: user_id and type.
      const failed = await eventsOf(t, { user_id: id, type: 'auth.login.failed' });
      assert.deepEqual(
        failed.map((e) => e.data.reason),
        ['account_disabled', 'invalid_credentials'],
      );

      // No secret anywhere in the whole event log, through the API and in the stored rows.
      const all = await t.request('GET', '/v1/admin/events?limit=500');
      assert.equal(all.status, 200);
      assert.ok(all.body.total >= expected.length);
      assert.equal(all.body.events.length, all.body.total);
      const stored = await t.gateway.repositories.events.query({ limit: 10_000, offset: 0 });
      for (const text of [JSON.stringify(all.body), JSON.stringify(stored.rows)]) {
        for (const secret of secrets)
          assert.ok(!text.includes(secret), `event log leaks ${secret.slice(0, 12)}...`);
        assert.doesNotMatch(text, /PRIVATE KEY/);
      }
    });
  });
}
