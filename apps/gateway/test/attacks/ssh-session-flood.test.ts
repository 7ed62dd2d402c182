import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import ssh2, { type ConnectConfig } from 'ssh2';
import { ensureLab, type LabDescription } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import {
  api,
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

  it('300 key logins at once: the gateway lives, each session works or is told why not', async () => {
    const outcomes = await Promise.all(Array.from({ length: 300 }, () => attempt({ ...login, privateKey })));
    await assertGatewayServes();
    assertEveryOneServedOrTold(outcomes);
    const served = outcomes.filter((o) => o.ok).length;
    console.log(`# key flood: ${served} of ${outcomes.length} sessions served`);
    assert.ok(served > 0, 'no session of the flood was served');
  });

  it('200 password logins at once: the same, and a session opened afterwards works', async () => {
    const outcomes = await Promise.all(Array.from({ length: 200 }, () => attempt({ ...login, password })));
    await assertGatewayServes();
    assertEveryOneServedOrTold(outcomes);
    console.log(`# password flood: ${outcomes.filter((o) => o.ok).length} of 200 sessions served`);
    assert.deepEqual(await attempt({ ...login, privateKey }), { ok: true });
  });
});
