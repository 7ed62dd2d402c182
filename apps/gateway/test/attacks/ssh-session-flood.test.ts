import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import ssh2, { type Client, type ConnectConfig } from 'ssh2';
import { ensureLab, type LabDescription } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import {
  api,
  eventually,
  type GatewayProcess,
  startLabGatewayProcessWithHost,
  waitForTask,
} from '../helpers/gateway-process.js';
import { buildTestImages } from '../helpers/lab-egress.js';
import { removeHostResources } from '../helpers/lab-gateway.js';
import { KeyFactory } from '../helpers/ssh-keygen.js';

/** What one client of the flood saw: a working session, or the words the gateway refused it with. */
type Outcome = { ok: true } | { ok: false; banner: string; error: string };

/** One login with ssh2 (a client that keeps its error listener), then `echo alive` once it is in. */
function attempt(config: ConnectConfig): Promise<Outcome> {
  return new Promise((resolve) => {
    const client = new ssh2.Client();
    let banner = '';
    let settled = false;
    const settle = (outcome: Outcome) => {
      if (settled) return;
      settled = true;
      client.end();
      resolve(outcome);
    };
    client.on('banner', (message: string) => {
      banner += message;
    });
    client.on('error', (error: Error) => settle({ ok: false, banner, error: error.message }));
    client.on('close', () => settle({ ok: false, banner, error: 'closed without a word' }));
    client.on('ready', () => {
      client.exec('echo alive', (error, stream) => {
        if (error) return settle({ ok: false, banner, error: `exec: ${error.message}` });
        let out = '';
        stream.on('data', (chunk: Buffer) => {
          out += chunk.toString();
        });
        stream.stderr.resume();
        stream.on('close', () =>
          settle(out.trim() === 'alive' ? { ok: true } : { ok: false, banner, error: `exec printed ${out}` }),
        );
      });
    });
    client.connect({ ...config, readyTimeout: 180_000, hostVerifier: () => true });
  });
}

/** A refusal a user can act on: it names the cause and says to try again (never a silent reset). */
const CLEAR_REFUSAL = /try again/;

/**
 * Point 0 of the hardening issue: a user opening many SSH sessions at once to their own workspace made the
 * workspace's sshd drop connections past its MaxStartups; the gateway's leg to it then emitted an `error`
 * nobody listened to and the whole gateway process ended, for every user. The gateway here is its own process,
 * started as an operator starts it, so a crash shows as its exit.
 */
describe('attack: a flood of SSH sessions to one workspace', {
  skip: needs('lab', 'docker'),
  timeout: 900_000,
}, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-ssh-flood-'));
  const keys = new KeyFactory();
  const hostIds: string[] = [];
  let lab: LabDescription;
  let gateway: GatewayProcess;
  let url: string;
  let token: string;
  let hostId: string;
  let login: { host: string; port: number; username: string };
  let password: string;
  let privateKey: string;

  before(async () => {
    [, lab] = await Promise.all([buildTestImages(), ensureLab()]);
    const started = await startLabGatewayProcessWithHost(lab, work, 'flood');
    ({ gateway, url, token, hostId } = started);
    hostIds.push(hostId);
    password = started.user.password;
    login = {
      host: '127.0.0.1',
      port: started.sshPort,
      username: `${started.user.username}+${started.shortId}`,
    };
    const key = keys.generate('ed25519');
    privateKey = key.privateKey;
    const added = await api(url, token, 'POST', `/v1/admin/users/${started.user.id}/ssh-keys`, {
      public_key: key.publicKey,
    });
    assert.equal(added.status, 201, JSON.stringify(added.body));
    const start = await api(url, token, 'POST', `/v1/admin/hosts/${hostId}/start`);
    assert.equal(start.status, 202, JSON.stringify(start.body));
    const task = await waitForTask(url, token, start.body.task_id);
    assert.equal(task.status, 'succeeded', JSON.stringify(task));
  });

  after(async () => {
    await gateway?.kill('SIGTERM');
    await removeHostResources(hostIds);
    keys.cleanup();
    rmSync(work, { recursive: true, force: true });
  });

  /** The gateway still runs, serves the API, and nothing went unheard. */
  async function assertGatewayServes(): Promise<void> {
    assert.ok(gateway.running, `the gateway process ended: ${gateway.output.slice(-3000)}`);
    assert.doesNotMatch(gateway.output, /Unhandled 'error' event/);
    const host = await api(url, token, 'GET', `/v1/admin/hosts/${hostId}`);
    assert.equal(host.status, 200);
    assert.equal(host.body.status, 'running');
  }

  function assertEveryOneServedOrTold(outcomes: Outcome[]): void {
    const silent = outcomes.filter((o) => !o.ok && !CLEAR_REFUSAL.test(o.banner));
    assert.deepEqual(silent.slice(0, 5), [], `${silent.length} of ${outcomes.length} got no clear refusal`);
  }

  // From five addresses: one address may have only SSH_MAX_UNAUTHENTICATED_PER_ADDRESS (64) logging in at once.
  const from = (i: number) => `127.0.0.${10 + (i % 5)}`;

  it('300 key logins at once: the gateway lives, each session works or is told why not', async () => {
    const outcomes = await Promise.all(
      Array.from({ length: 300 }, (_, i) => attempt({ ...login, privateKey, localAddress: from(i) })),
    );
    await assertGatewayServes();
    assertEveryOneServedOrTold(outcomes);
    const served = outcomes.filter((o) => o.ok).length;
    console.log(`# key flood: ${served} of ${outcomes.length} sessions served`);
    assert.ok(served > 0, 'no session of the flood was served');
  });

  it('200 password logins at once: the same, and a session opened afterwards works', async () => {
    const outcomes = await Promise.all(
      Array.from({ length: 200 }, (_, i) => attempt({ ...login, password, localAddress: from(i) })),
    );
    await assertGatewayServes();
    assertEveryOneServedOrTold(outcomes);
    console.log(`# password flood: ${outcomes.filter((o) => o.ok).length} of 200 sessions served`);
    assert.deepEqual(await attempt({ ...login, privateKey }), { ok: true });
  });

  it('an address holding many connections that never log in is cut past its share; others still get in', async () => {
    const held: Socket[] = [];
    const open = () =>
      new Promise<Socket>((resolve, reject) => {
        const socket = connect({ host: '127.0.0.1', port: login.port, localAddress: '127.0.0.30' });
        socket.on('error', () => {});
        socket.once('connect', () => resolve(socket));
        socket.once('error', reject);
      });
    const closedWithin = (socket: Socket, ms: number) =>
      new Promise<boolean>((resolve) => {
        if (socket.destroyed) return resolve(true);
        const timer = setTimeout(() => resolve(false), ms);
        socket.once('close', () => {
          clearTimeout(timer);
          resolve(true);
        });
      });
    try {
      for (let i = 0; i < 64; i++) held.push(await open());
      const extra = await open();
      held.push(extra);
      assert.equal(await closedWithin(extra, 3000), true, 'the 65th connection was not cut');
      assert.equal(await closedWithin(held[0]!, 500), false, 'a connection within the share was cut');
      // Another address, and the gateway's API, are untouched.
      assert.deepEqual(await attempt({ ...login, privateKey, localAddress: '127.0.0.31' }), { ok: true });
      await assertGatewayServes();
    } finally {
      for (const socket of held) socket.destroy();
    }
  });
});

describe('attack: more SSH sessions than a user may have', {
  skip: needs('lab', 'docker'),
  timeout: 600_000,
}, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-ssh-cap-'));
  const hostIds: string[] = [];
  let gateway: GatewayProcess | undefined;
  after(async () => {
    await gateway?.kill('SIGTERM');
    await removeHostResources(hostIds);
    rmSync(work, { recursive: true, force: true });
  });

  it('past SSH_MAX_SESSIONS_PER_USER a login is refused with what to do, and one closed makes room', async () => {
    const lab = await ensureLab();
    await buildTestImages();
    const started = await startLabGatewayProcessWithHost(lab, work, 'cap', {
      SSH_MAX_SESSIONS_PER_USER: '2',
    });
    gateway = started.gateway;
    hostIds.push(started.hostId);
    const start = await api(started.url, started.token, 'POST', `/v1/admin/hosts/${started.hostId}/start`);
    assert.equal((await waitForTask(started.url, started.token, start.body.task_id)).status, 'succeeded');
    const config = {
      host: '127.0.0.1',
      port: started.sshPort,
      username: `${started.user.username}+${started.shortId}`,
      password: started.user.password,
    };
    const live = (): Promise<Client> =>
      new Promise((resolve, reject) => {
        const client = new ssh2.Client();
        client.on('error', reject);
        client.once('ready', () => resolve(client));
        client.connect({ ...config, readyTimeout: 60_000, hostVerifier: () => true });
      });
    const [first, second] = [await live(), await live()];
    const third = await attempt(config);
    assert.equal(third.ok, false);
    assert.match(
      third.ok ? '' : third.banner,
      /has 2 SSH sessions open, the most one user may have; close one and try again/,
    );
    first.end();
    await eventually('the closed session to be let go', async () => (await attempt(config)).ok);
    second.end();
  });
});
