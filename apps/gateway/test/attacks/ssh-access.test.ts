import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { labUnavailable } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { type LabGateway, startLabGateway } from '../helpers/lab-gateway.js';
import { sshWithKey, sshWithPassword, until } from '../helpers/openssh.js';
import { KeyFactory } from '../helpers/ssh-keygen.js';
import type { TestGateway } from '../helpers/test-gateway.js';

const skip = labUnavailable() || needs('ssh', 'sshpass', 'ssh-keygen');

/** Attacks on the SSH proxy's logins and on sessions that outlive the credentials that opened them. */
describe('attack: SSH access, with OpenSSH clients against a real workspace', {
  skip,
  timeout: 900_000,
}, () => {
  const username = `sa${randomBytes(3).toString('hex')}`;
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-ssh-attack-'));
  const keys = new KeyFactory();
  let lab: LabGateway;
  let t: TestGateway;
  let user: { id: string; token: string; password: string; sshPass: string };
  let login: string;
  let keyFile: string;

  const sshPassword = (args: string[], password: string, timeoutMs?: number) =>
    sshWithPassword(t.gateway.ssh.port, password, args, timeoutMs);
  const sshKey = (args: string[], timeoutMs?: number) =>
    sshWithKey(t.gateway.ssh.port, keyFile, args, { timeoutMs });
  const closedReasons = async () =>
    (
      (await t.request('GET', `/v1/admin/events?type=ssh.session.closed&user_id=${user.id}&limit=500`)).body
        .events as { data: { reason: string } }[]
    ).map((e) => e.data.reason);

  // The gateway's timers are unref'd: this one keeps the process alive while a step waits on the engine.
  const alive = setInterval(() => {}, 1000);

  before(async () => {
    lab = await startLabGateway();
    t = lab.t;
    user = await t.createUser(username);
    const host = await lab.createHost(user.id);
    login = `${username}+${host.short_id}`;
    const key = keys.generate('ed25519');
    keyFile = path.join(work, 'id_ed25519');
    writeFileSync(keyFile, key.privateKey, { mode: 0o600 });
    const added = await t.request('POST', `/v1/admin/users/${user.id}/ssh-keys`, {
      body: { public_key: key.publicKey },
    });
    assert.equal(added.status, 201, JSON.stringify(added.body));
    await lab.startHost(host.id);
  });

  after(async () => {
    clearInterval(alive);
    await lab?.close();
    keys.cleanup();
    rmSync(work, { recursive: true, force: true });
  });

  it('a password-guessing storm against the user does not stop their key-based logins', async () => {
    for (let i = 0; i < 12; i++) {
      const wrong = await sshPassword(['-b', '127.0.0.2', `${login}@127.0.0.1`, 'true'], `guess-${i}`);
      assert.notEqual(wrong.code, 0);
    }
    const guessed = await sshPassword(['-b', '127.0.0.2', `${login}@127.0.0.1`, 'true'], user.sshPass);
    assert.match(guessed.stderr, /too many failed login attempts/, 'the guessing address is slowed down');
    for (const from of ['127.0.0.1', '127.0.0.2']) {
      const result = await sshKey(['-b', from, `${login}@127.0.0.1`, 'echo key-ok']);
      assert.equal(result.code, 0, `from ${from}: ${result.stderr}`);
      assert.equal(result.stdout.trim(), 'key-ok');
    }
  });

  it('a password change ends the open SSH sessions and the old SSH password', async () => {
    // The earlier test's sessions may still be closing: the count below must be this session's.
    await until('no session left', () => t.gateway.ssh.sessionCount() === 0);
    const session = sshPassword([`${login}@127.0.0.1`, 'sleep 120'], user.sshPass, 90_000);
    await until('the session to be live', () => t.gateway.ssh.sessionCount() === 1);
    const changed = await t.request('POST', '/v1/user/change-password', {
      token: user.token,
      body: { old_password: user.password, new_password: 'a-new-password-1' },
    });
    assert.equal(changed.status, 200, JSON.stringify(changed.body));
    const changedAt = Date.now();
    const cut = await session;
    assert.notEqual(cut.code, 0);
    assert.ok(Date.now() - changedAt < 15_000, 'the session outlived the password change');
    await until('the closed event', async () => (await closedReasons()).includes('user_credentials_changed'));
    const old = await sshPassword([`${login}@127.0.0.1`, 'echo in'], user.sshPass);
    assert.equal(old.code, 255, 'the old SSH password still logs in');
  });

  it('a client that keeps its connection open after the disconnect loses it all the same', async () => {
    // Between the client and the gateway, a relay that passes bytes on but never a close: to the gateway, a
    // client that ignores the disconnect and never closes its side.
    const held: Socket[] = [];
    const relay = createServer({ allowHalfOpen: true }, (client) => {
      const gateway = connect({ port: t.gateway.ssh.port, host: '127.0.0.1', allowHalfOpen: true });
      held.push(client, gateway);
      client.pipe(gateway, { end: false });
      gateway.pipe(client, { end: false });
      for (const socket of [client, gateway]) socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    try {
      const viaRelay = (relay.address() as AddressInfo).port;
      const session = sshWithKey(viaRelay, keyFile, [`${login}@127.0.0.1`, 'sleep 120'], {
        timeoutMs: 60_000,
      });
      await until('the session to be live', () => t.gateway.ssh.sessionCount() === 1);
      const before = (await closedReasons()).length;
      const rotated = await t.request('POST', `/v1/admin/users/${user.id}/rotate-password`);
      assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
      await until(
        'the session to be gone from the gateway',
        () => t.gateway.ssh.sessionCount() === 0,
        10_000,
      );
      const reasons = await closedReasons();
      assert.equal(reasons.length, before + 1);
      assert.equal(reasons[0], 'user_credentials_changed');
      await session;
    } finally {
      for (const socket of held) socket.destroy();
      relay.close();
    }
  });

  it('a password rotation by an admin ends key-based sessions too; the registered key stays', async () => {
    const session = sshKey([`${login}@127.0.0.1`, 'sleep 120'], 90_000);
    await until('the session to be live', () => t.gateway.ssh.sessionCount() === 1);
    const rotated = await t.request('POST', `/v1/admin/users/${user.id}/rotate-password`);
    assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
    const rotatedAt = Date.now();
    const cut = await session;
    assert.notEqual(cut.code, 0);
    assert.ok(Date.now() - rotatedAt < 15_000, 'the session outlived the rotation');
    const again = await sshKey([`${login}@127.0.0.1`, 'echo key-ok']);
    assert.equal(again.code, 0, again.stderr);
  });
});
