import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { needs } from '../../../../test/support/needs.js';
import { assertError, assertEvent, assertValidation, eventsOf, ISO_UTC, UUID } from '../helpers/expect.js';
import { KeyFactory, securityKeyLines } from '../helpers/ssh-keygen.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const KEY_FIELDS = ['created_at', 'fingerprint', 'id', 'key_type', 'label', 'public_key'];
const NO_SUCH_KEY = '00000000-0000-4000-8000-000000000000';

const keys = new KeyFactory();
after(() => keys.cleanup());

for (const kind of DATABASES) {
  describe(`SSH keys (${kind})`, { skip: needs('ssh-keygen') }, () => {
    let t: TestGateway;
    let admin: { kind: string; id: string; username: string };
    before(async () => {
      t = await startTestGateway(kind);
      const users = await t.request('GET', '/v1/admin/users');
      admin = { kind: 'admin', id: users.body.users[0].id, username: 'admin' };
    });
    after(() => t.close());

    describe('admin routes', () => {
      let user: Awaited<ReturnType<TestGateway['createUser']>>;
      let base: string;
      before(async () => {
        user = await t.createUser('keyholder');
        base = `/v1/admin/users/${user.id}/ssh-keys`;
      });

      it('adds ed25519, ecdsa, rsa 2048 and sk-* keys: 201 key object with the ssh-keygen fingerprint', async () => {
        const sk = securityKeyLines();
        const cases: Array<[string, string, string | undefined]> = [
          [keys.generate('ed25519', undefined, 'alice@laptop').publicKey, 'ssh-ed25519', 'alice@laptop'],
          [keys.generate('ecdsa', 256, 'ec').publicKey, 'ecdsa-sha2-nistp256', 'ec'],
          [keys.generate('ecdsa', 521, 'ec521').publicKey, 'ecdsa-sha2-nistp521', 'ec521'],
          [keys.generate('rsa', 2048, 'rsa-key').publicKey, 'ssh-rsa', 'rsa-key'],
          [sk.ed25519, 'sk-ssh-ed25519@openssh.com', 'yubikey'],
        ];
        for (const [line, keyType, label] of cases) {
          const response = await t.request('POST', base, { body: { public_key: `${line}\n` } });
          assert.equal(response.status, 201, JSON.stringify(response.body));
          assert.deepEqual(Object.keys(response.body).sort(), KEY_FIELDS);
          assert.match(response.body.id, UUID);
          assert.equal(response.body.key_type, keyType);
          assert.equal(response.body.public_key, line);
          assert.equal(response.body.label, label);
          assert.equal(response.body.fingerprint, keys.fingerprint(line));
          assert.match(response.body.fingerprint, /^SHA256:[A-Za-z0-9+/]{43}$/);
          assert.match(response.body.created_at, ISO_UTC);
          const event = await eventsOf(t, { user_id: user.id, type: 'user.ssh_key.added' });
          assert.deepEqual(event[0].actor, admin);
          assert.deepEqual(event[0].data, {
            key_id: response.body.id,
            fingerprint: response.body.fingerprint,
            key_type: keyType,
          });
        }
        const labelled = keys.generate('ed25519', undefined, 'comment');
        const withLabel = await t.request('POST', base, {
          body: { public_key: labelled.publicKey, label: '  Work laptop ' },
        });
        assert.equal(withLabel.status, 201);
        assert.equal(withLabel.body.label, 'Work laptop');
        const list = await t.request('GET', base);
        assert.equal(list.status, 200);
        assert.deepEqual(Object.keys(list.body), ['keys']);
        assert.equal(list.body.keys.length, 6);
        assert.equal(list.body.keys[0].id, withLabel.body.id, 'newest first');
        for (const key of list.body.keys) assert.deepEqual(Object.keys(key).sort(), KEY_FIELDS);
      });

      it('refuses the same key twice with 409, also under another comment', async () => {
        const key = keys.generate('ed25519', undefined, 'first');
        assert.equal((await t.request('POST', base, { body: { public_key: key.publicKey } })).status, 201);
        const before = (await t.request('GET', base)).body.keys.length;
        const again = await t.request('POST', base, { body: { public_key: key.publicKey } });
        assertError(again, 409, 'key_exists');
        const [type, data] = key.publicKey.split(' ');
        assertError(
          await t.request('POST', base, { body: { public_key: `${type} ${data} other` } }),
          409,
          'key_exists',
        );
        assert.equal((await t.request('GET', base)).body.keys.length, before);
      });

      it('refuses bad keys with 400 validation_failed on public_key: garbage, RSA 1024, a private key', async () => {
        const rsa1024 = keys.generate('rsa', 1024);
        const ed = keys.generate('ed25519');
        const before = (await t.request('GET', base)).body.keys.length;
        const cases: Array<[unknown, RegExp]> = [
          [{ public_key: 'not a key' }, /not accepted/],
          [{ public_key: 'ssh-ed25519 AAAA' }, /not|match/],
          [{ public_key: rsa1024.publicKey }, /2048/],
          [{ public_key: ed.privateKey }, /private key/],
          [{ public_key: `ssh-dss ${ed.publicKey.split(' ')[1]}` }, /not accepted/],
        ];
        for (const [body, reason] of cases) {
          const response = await t.request('POST', base, { body });
          assertValidation(response, ['public_key']);
          assert.match(response.body.details[0].message, reason);
          // The message is one sentence about the key, the reason following "The public key".
          assert.equal(response.body.error, `The public key ${response.body.details[0].message}`);
          assert.match(response.body.error, /^The public key (is|must|has|needs) /);
        }
        assertValidation(await t.request('POST', base, { body: {} }), ['public_key']);
        assertValidation(await t.request('POST', base, { body: { public_key: '' } }), ['public_key']);
        assert.equal((await t.request('GET', base)).body.keys.length, before);
        // The refused private key is not echoed anywhere.
        const events = JSON.stringify(await eventsOf(t, { user_id: user.id }));
        assert.ok(!events.includes(ed.privateKey.split('\n')[1]!));
      });

      it('generates an ed25519 pair: 201 with an OpenSSH private key whose public half is the stored key', async () => {
        const response = await t.request('POST', `${base}/generate`);
        assert.equal(response.status, 201, JSON.stringify(response.body));
        const { private_key, ...key } = response.body;
        assert.deepEqual(Object.keys(key).sort(), KEY_FIELDS);
        assert.equal(key.key_type, 'ssh-ed25519');
        assert.equal(key.label, 'keyholder@cloud-cli-proxy');
        assert.match(
          private_key,
          /^-----BEGIN OPENSSH PRIVATE KEY-----\n[\s\S]+\n-----END OPENSSH PRIVATE KEY-----\n?$/,
        );
        assert.equal(keys.publicOf(private_key), key.public_key.split(' ').slice(0, 2).join(' '));
        assert.equal(key.fingerprint, keys.fingerprint(key.public_key));

        const list = await t.request('GET', base);
        const stored = list.body.keys.find((k: any) => k.id === key.id);
        assert.deepEqual(stored, key);
        const body = private_key.split('\n')[2];
        assert.ok(!JSON.stringify(list.body).includes(body), 'the private key is not listed');
        assert.ok(!JSON.stringify(list.body).includes('PRIVATE'));
        const event = await assertEvent(t, { user_id: user.id, type: 'user.ssh_key.generated' }, admin);
        assert.equal(event.data.key_id, key.id);
        assert.ok(!JSON.stringify(await eventsOf(t, {})).includes(body), 'the private key is not in events');

        const labelled = await t.request('POST', `${base}/generate`, { body: { label: 'ci-runner' } });
        assert.equal(labelled.status, 201);
        assert.equal(labelled.body.label, 'ci-runner');
        assert.match(labelled.body.public_key, / ci-runner$/);
        assert.notEqual(labelled.body.private_key, private_key);
      });

      it('deletes a key: 204, then 404; unknown and malformed ids 404', async () => {
        const added = await t.request('POST', base, {
          body: { public_key: keys.generate('ed25519').publicKey },
        });
        const deleted = await t.request('DELETE', `${base}/${added.body.id}`);
        assert.equal(deleted.status, 204);
        assert.equal(deleted.body, '');
        assertError(await t.request('DELETE', `${base}/${added.body.id}`), 404, 'not_found');
        assert.ok(!(await t.request('GET', base)).body.keys.some((k: any) => k.id === added.body.id));
        assertError(await t.request('DELETE', `${base}/${NO_SUCH_KEY}`), 404, 'not_found');
        assertError(await t.request('DELETE', `${base}/not-a-uuid`), 404, 'not_found');
        const event = await assertEvent(t, { user_id: user.id, type: 'user.ssh_key.deleted' }, admin);
        assert.equal(event.data.key_id, added.body.id);
        // The key can be added again once deleted.
        const readded = await t.request('POST', base, { body: { public_key: added.body.public_key } });
        assert.equal(readded.status, 201);
      });

      it("only touches the user in the path: another user's key id is 404 there", async () => {
        const other = await t.createUser('other-keyholder');
        const otherKey = await t.request('POST', `/v1/admin/users/${other.id}/ssh-keys`, {
          body: { public_key: keys.generate('ed25519').publicKey },
        });
        assert.equal(otherKey.status, 201);
        assertError(await t.request('DELETE', `${base}/${otherKey.body.id}`), 404, 'not_found');
        const otherList = await t.request('GET', `/v1/admin/users/${other.id}/ssh-keys`);
        assert.deepEqual(
          otherList.body.keys.map((k: any) => k.id),
          [otherKey.body.id],
        );
        assert.ok(!(await t.request('GET', base)).body.keys.some((k: any) => k.id === otherKey.body.id));
      });

      it('answers 404 for keys of an unknown user, and drops keys with their user', async () => {
        const gone = await t.createUser('gone-keyholder');
        const url = `/v1/admin/users/${gone.id}/ssh-keys`;
        assert.equal((await t.request('POST', `${url}/generate`)).status, 201);
        assert.equal((await t.request('DELETE', `/v1/admin/users/${gone.id}`)).status, 204);
        assertError(await t.request('GET', url), 404, 'not_found');
        assertError(
          await t.request('POST', url, { body: { public_key: keys.generate('ed25519').publicKey } }),
          404,
          'not_found',
        );
        assertError(await t.request('POST', `${url}/generate`), 404, 'not_found');
        assert.deepEqual(await t.gateway.repositories.sshKeys.listForUser(gone.id), []);
      });
    });

    describe('user routes', () => {
      it("let a user manage only their own keys; another user's key id is 404", async () => {
        const alice = await t.createUser('alice');
        const bob = await t.createUser('bob');
        const aliceActor = { kind: 'user', id: alice.id, username: 'alice' };

        const empty = await t.request('GET', '/v1/user/ssh-keys', { token: alice.token });
        assert.equal(empty.status, 200);
        assert.deepEqual(empty.body, { keys: [] });

        const key = keys.generate('ed25519', undefined, 'alice@home');
        const added = await t.request('POST', '/v1/user/ssh-keys', {
          token: alice.token,
          body: { public_key: key.publicKey },
        });
        assert.equal(added.status, 201, JSON.stringify(added.body));
        assert.deepEqual(Object.keys(added.body).sort(), KEY_FIELDS);
        assert.equal(added.body.fingerprint, key.fingerprint);
        await assertEvent(t, { user_id: alice.id, type: 'user.ssh_key.added' }, aliceActor);
        assertError(
          await t.request('POST', '/v1/user/ssh-keys', {
            token: alice.token,
            body: { public_key: key.publicKey },
          }),
          409,
          'key_exists',
        );
        assertValidation(
          await t.request('POST', '/v1/user/ssh-keys', {
            token: alice.token,
            body: { public_key: keys.generate('rsa', 1024).publicKey },
          }),
          ['public_key'],
        );

        const generated = await t.request('POST', '/v1/user/ssh-keys/generate', { token: alice.token });
        assert.equal(generated.status, 201, JSON.stringify(generated.body));
        assert.equal(
          keys.publicOf(generated.body.private_key),
          generated.body.public_key.split(' ').slice(0, 2).join(' '),
        );
        await assertEvent(t, { user_id: alice.id, type: 'user.ssh_key.generated' }, aliceActor);

        const bobKey = await t.request('POST', '/v1/user/ssh-keys', {
          token: bob.token,
          body: { public_key: keys.generate('ecdsa', 384).publicKey },
        });
        assert.equal(bobKey.status, 201);

        const aliceList = await t.request('GET', '/v1/user/ssh-keys', { token: alice.token });
        assert.deepEqual(
          aliceList.body.keys.map((k: any) => k.id),
          [generated.body.id, added.body.id],
        );
        assert.ok(!JSON.stringify(aliceList.body).includes('PRIVATE KEY'));
        const bobList = await t.request('GET', '/v1/user/ssh-keys', { token: bob.token });
        assert.deepEqual(
          bobList.body.keys.map((k: any) => k.id),
          [bobKey.body.id],
        );
        // The admin sees the same keys for the user.
        const adminView = await t.request('GET', `/v1/admin/users/${alice.id}/ssh-keys`);
        assert.deepEqual(adminView.body, aliceList.body);

        // Alice cannot delete Bob's key, whatever id she tries.
        assertError(
          await t.request('DELETE', `/v1/user/ssh-keys/${bobKey.body.id}`, { token: alice.token }),
          404,
          'not_found',
        );
        assertError(
          await t.request('DELETE', `/v1/user/ssh-keys/${NO_SUCH_KEY}`, { token: alice.token }),
          404,
          'not_found',
        );
        assertError(
          await t.request('DELETE', '/v1/user/ssh-keys/not-a-uuid', { token: alice.token }),
          404,
          'not_found',
        );
        assert.deepEqual(
          (await t.request('GET', '/v1/user/ssh-keys', { token: bob.token })).body,
          bobList.body,
        );

        const deleted = await t.request('DELETE', `/v1/user/ssh-keys/${added.body.id}`, {
          token: alice.token,
        });
        assert.equal(deleted.status, 204);
        assertError(
          await t.request('DELETE', `/v1/user/ssh-keys/${added.body.id}`, { token: alice.token }),
          404,
          'not_found',
        );
        const after = await t.request('GET', '/v1/user/ssh-keys', { token: alice.token });
        assert.deepEqual(
          after.body.keys.map((k: any) => k.id),
          [generated.body.id],
        );
        const event = await assertEvent(t, { user_id: alice.id, type: 'user.ssh_key.deleted' }, aliceActor);
        assert.equal(event.data.key_id, added.body.id);
        // Bob's failed attempt was not logged as a deletion of his key.
        assert.equal((await eventsOf(t, { user_id: bob.id, type: 'user.ssh_key.deleted' })).length, 0);
      });
    });
  });
}
