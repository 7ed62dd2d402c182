import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { ensureLab } from '../../../../test/lab/lab.js';
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
import { type LiveSession, openLiveSession, sshWithPassword, until } from '../helpers/openssh.js';

const run = promisify(execFile);
const LIMIT = 2;

/**
 * Issue 28: each session is a connection through the relay in the host's egress gateway, which takes a fixed
 * number at once. One past it used to wait in the relay's backlog until the gateway's login to the workspace timed
 * out (15 s) and the user heard only that the SSH service did not answer. Now the proxy refuses it at once, saying
 * which limit and what to do.
 */
describe('SSH sessions of one host past SSH_MAX_SESSIONS_PER_HOST', {
  skip: needs('lab', 'docker', 'ssh', 'sshpass'),
  timeout: 600_000,
}, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-ssh-host-cap-'));
  const hostIds: string[] = [];
  const sessions: LiveSession[] = [];
  let gateway: GatewayProcess | undefined;
  after(async () => {
    for (const session of sessions) session.child.kill('SIGTERM');
    await gateway?.kill('SIGTERM');
    await removeHostResources(hostIds);
    rmSync(work, { recursive: true, force: true });
  });

  it('refuses one more with real OpenSSH at once, naming the limit; a closed one makes room', async () => {
    const lab = await ensureLab();
    await buildTestImages();
    const started = await startLabGatewayProcessWithHost(lab, work, 'hostcap', {
      SSH_MAX_SESSIONS_PER_HOST: String(LIMIT),
    });
    gateway = started.gateway;
    hostIds.push(started.hostId);
    const start = await api(started.url, started.token, 'POST', `/v1/admin/hosts/${started.hostId}/start`);
    assert.equal((await waitForTask(started.url, started.token, start.body.task_id)).status, 'succeeded');
    const { sshPort, user } = started;
    const login = `${user.username}+${started.shortId}@127.0.0.1`;

    // The relay itself takes more than any host may have: it is the proxy that says no, not a silent backlog.
    const relay = await run('docker', [
      'exec',
      `ccp-egress-${started.hostId}`,
      'sh',
      '-c',
      'tr "\\0" " " </proc/$(cat /run/ccp-egress/relay-22.pid)/cmdline',
    ]);
    assert.match(relay.stdout, /max-children=128\b/);

    for (let i = 0; i < LIMIT; i++) {
      const session = openLiveSession(sshPort, user.password, ['-tt', login, 'echo ready; exec sleep 600']);
      sessions.push(session);
      await until(
        `session ${i + 1} to open`,
        () => session.lines.some((line) => line.includes('ready')),
        60_000,
      );
    }

    const began = Date.now();
    const refused = await sshWithPassword(sshPort, user.password, [login, 'echo alive'], 60_000);
    const tookMs = Date.now() - began;
    assert.equal(refused.code, 255, refused.stderr);
    assert.doesNotMatch(refused.stdout, /alive/);
    assert.match(
      refused.stderr,
      new RegExp(
        `host ${started.shortId} has ${LIMIT} SSH sessions open or opening, the most one host may have ` +
          '\\(SSH_MAX_SESSIONS_PER_HOST\\); close one of them and try again',
      ),
    );
    // At once: not after the 15 s the gateway gives a workspace login, nor OpenSSH's own timeouts.
    assert.ok(tookMs < 10_000, `the refusal took ${tookMs} ms`);
    for (const session of sessions) assert.equal(session.child.exitCode, null, 'a held session was cut');

    sessions[0]!.child.kill('SIGTERM');
    await sessions[0]!.exited;
    await eventually('the closed session to make room', async () => {
      const again = await sshWithPassword(sshPort, user.password, [login, 'echo alive'], 60_000);
      return again.code === 0 && again.stdout.trim() === 'alive';
    });
  });
});
