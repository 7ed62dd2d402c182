import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { labUnavailable } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { type LabGateway, type LabTenant, startLabGateway, startTenant } from '../helpers/lab-gateway.js';
import { type LiveSession, openLiveSession, sshWithPassword, until, within } from '../helpers/openssh.js';
import { SseClient } from '../helpers/sse-client.js';

const IDLE_SECONDS = 8;
const WARNING_SECONDS = 3;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * What users see of a host's lifecycle policy on a real workspace: an agent left working in tmux with no session
 * open keeps it running past its idle timeout, and so does someone typing in a session; a terminal left attached
 * and quiet does not: it is told (as is the live stream), an extend moves the stop, and the host stops as idle; a
 * maximum lifetime stops it even with a session in use, whose terminal is told first.
 */
describe('idle stop and maximum lifetime of a real workspace', {
  skip: labUnavailable() || needs('ssh', 'sshpass'),
  timeout: 600_000,
}, () => {
  const username = `idle${randomBytes(3).toString('hex')}`;
  let lab: LabGateway;
  let tenant: LabTenant;
  const setPolicy = async (idle: number | null, lifetime: number | null) => {
    const set = await lab.t.request('PUT', `/v1/admin/hosts/${tenant.hostId}/lifecycle-policy`, {
      body: { idle_timeout_seconds: idle, max_lifetime_seconds: lifetime, schedule: null },
    });
    assert.equal(set.status, 200, JSON.stringify(set.body));
  };
  /**
   * Types in an attached session until its input is the host's last activity. A round that also sees the
   * workspace's CPU (a shell just started) names that signal instead, so the keys keep coming until one shows.
   */
  const typeUntilCounted = (session: LiveSession) => {
    const typedAt = Date.now();
    return until(
      'the keys to count as the host’s activity',
      async () => {
        session.child.stdin.write('true\n');
        const { lifecycle } = await tenant.host();
        return (
          lifecycle.last_activity_signal === 'session' && Date.parse(lifecycle.last_activity_at) >= typedAt
        );
      },
      40_000,
    );
  };
  /** A command in the workspace, run the way a user does: ssh through the proxy. */
  const inWorkspace = async (command: string) => {
    const result = await sshWithPassword(
      tenant.port,
      tenant.sshPass,
      [`${tenant.login}@127.0.0.1`, command],
      60_000,
    );
    assert.equal(result.code, 0, `${command}: ${result.stderr}`);
  };

  before(async () => {
    lab = await startLabGateway({
      HOST_ACTIVITY_SECONDS: '1',
      HOST_STOP_WARNING_SECONDS: String(WARNING_SECONDS),
    });
    tenant = await startTenant(lab, username);
  });

  after(async () => {
    await lab?.close();
  });

  it('an agent printing and computing in tmux, with no session open, keeps the host past its idle timeout', async () => {
    // An assistant's loop: output every second and CPU in between; the SSH session that started it ends.
    await inWorkspace(
      `tmux new-session -d -s agent 'while :; do date; i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 1; done'`,
    );
    await setPolicy(IDLE_SECONDS, null);
    const since = Date.now();
    await sleep((IDLE_SECONDS * 2 + WARNING_SECONDS) * 1000);
    const now = await tenant.host();
    assert.equal(now.status, 'running');
    assert.deepEqual(await tenant.events('host.stop_warning'), [], 'never warned: it was working');
    assert.ok(
      ['terminal', 'cpu'].includes(now.lifecycle.last_activity_signal),
      JSON.stringify(now.lifecycle),
    );
    assert.ok(
      Date.parse(now.lifecycle.last_activity_at) > since + IDLE_SECONDS * 1000,
      'activity kept being seen',
    );
    assert.equal(now.lifecycle.planned_stop.reason, 'idle');
  });

  it('someone typing in a session keeps it; left attached and quiet, that terminal and the live stream are warned, an extend moves the stop, then it stops as idle', async () => {
    const sse = await SseClient.open(`${lab.t.url}/v1/admin/sse?token=${lab.t.adminToken}&topics=hosts`);
    const session = openLiveSession(tenant.port, tenant.sshPass, ['-tt', `${tenant.login}@127.0.0.1`]);
    try {
      await inWorkspace('tmux kill-server');
      // Someone at the keyboard of an attached terminal: a key a second, past the idle timeout and its warning.
      const typingFrom = Date.now();
      while (Date.now() - typingFrom < (IDLE_SECONDS + WARNING_SECONDS + 3) * 1000) {
        session.child.stdin.write('\n');
        await sleep(1000);
      }
      await typeUntilCounted(session);
      assert.equal((await tenant.host()).status, 'running');
      assert.deepEqual(await tenant.events('host.stop_warning'), [], 'never warned while someone typed');
      // The terminal stays attached, and nobody types in it any more.
      const quietAt = Date.now();
      const updates = () =>
        sse
          .messages()
          .map((m) => m.data)
          .filter((m) => m.topic === 'hosts' && m.id === tenant.hostId)
          .map((m) => m.payload);
      await until(
        'a warning on the live stream',
        () => updates().some((h) => h.lifecycle?.planned_stop?.warned_at),
        (IDLE_SECONDS + 15) * 1000,
      );
      const warned = updates().find((h) => h.lifecycle?.planned_stop?.warned_at);
      assert.equal(warned.status, 'running');
      assert.equal(warned.lifecycle.planned_stop.reason, 'idle');
      await until('the warning in the attached terminal', () => session.stderr().includes('stops in about'));
      assert.match(session.stderr(), /idle: no input in a session, terminal output, CPU or network use/);
      assert.equal((await tenant.host()).status, 'running', 'told before the stop');
      const firstStop = Date.parse(warned.lifecycle.planned_stop.at);
      assert.ok(firstStop - quietAt >= IDLE_SECONDS * 1000 - 2000, 'not before its idle timeout');

      const extended = await lab.t.request('POST', `/v1/admin/hosts/${tenant.hostId}/extend`, {
        body: { seconds: 10 },
      });
      assert.equal(extended.status, 200, JSON.stringify(extended.body));
      const movedTo = Date.parse(extended.body.lifecycle.planned_stop.at);
      assert.ok(movedTo >= firstStop + 10_000, `moved from ${firstStop} to ${movedTo}`);
      assert.equal(extended.body.lifecycle.planned_stop.warned_at, null);

      await sleep(Math.max(0, firstStop - Date.now()) + 2000);
      assert.equal((await tenant.host()).status, 'running', 'still running past the stop it had');

      await until('the idle stop', async () => (await tenant.host()).status === 'stopped', 40_000);
      const stoppedAt = Date.now();
      await within(40_000, 'the attached session to end with the host', session.exited);
      assert.ok(stoppedAt >= movedTo - 1000, 'not before the extended stop');
      const warnings = await tenant.events('host.stop_warning');
      assert.equal(
        warnings.length,
        2,
        'warned before the first planned stop and again before the extended one',
      );
      const [stop] = await tenant.events('host.policy_stop');
      assert.equal(stop.data.reason, 'idle');
      // Newest first: the warning of the extended stop came a full warning time before it.
      assert.ok(
        Date.parse(warnings[0].created_at) <= Date.parse(stop.created_at) - WARNING_SECONDS * 1000,
        JSON.stringify({
          warnings: warnings.map((w: { created_at: string }) => w.created_at),
          stop: stop.created_at,
        }),
      );
      const task = (await lab.t.request('GET', `/v1/admin/tasks/${stop.data.task_id}`)).body;
      assert.equal(task.kind, 'stop');
      assert.equal(task.status, 'succeeded');

      const refused = await sshWithPassword(
        tenant.port,
        tenant.sshPass,
        [`${tenant.login}@127.0.0.1`, 'true'],
        30_000,
      );
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /stopped by the gateway at \S+ for its lifecycle policy, idle: /);
    } finally {
      sse.close();
      session.child.kill();
    }
  });

  it('a maximum lifetime stops the host even with a session open, whose terminal is told first', async () => {
    await setPolicy(0, 40);
    await within(300_000, 'the workspace start', lab.startHost(tenant.hostId));
    const session = openLiveSession(tenant.port, tenant.sshPass, ['-tt', `${tenant.login}@127.0.0.1`]);
    try {
      // Its user types: the session is activity, and the lifetime stops the host all the same.
      await typeUntilCounted(session);
      await until('the line in the terminal', () => session.stderr().includes('stops in about'), 60_000);
      assert.equal((await tenant.host()).status, 'running', 'told before the stop');
      assert.match(session.stderr(), /lifetime: it ran for its maximum lifetime/);
      assert.match(session.stderr(), /`ccp extend`/);
      await within(40_000, 'the session to end with the host', session.exited);
      await until('the stop to end', async () => (await tenant.host()).status === 'stopped', 60_000);
      const stops = await tenant.events('host.policy_stop');
      assert.equal(stops[0].data.reason, 'lifetime', 'the newest stop');
      const refused = await sshWithPassword(
        tenant.port,
        tenant.sshPass,
        [`${tenant.login}@127.0.0.1`, 'true'],
        30_000,
      );
      assert.match(refused.stderr, /for its lifecycle policy, lifetime: /);
    } finally {
      session.child.kill();
    }
  });
});
