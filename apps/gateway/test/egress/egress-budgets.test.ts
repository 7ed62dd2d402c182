/**
 * Issue 30, budgets: a real workspace behind the lab's VMess exit, its user moving bytes over real OpenSSH, the
 * meter sampling every second. One test per action at the limit: a warning and `notify` (an event, the host's
 * view on the live stream, a line in the attached session), `throttle` (the rate measured through the tunnel
 * drops below the limit set, and recovers when the budget is raised), `stop` (the host stops with the reason
 * egress_budget, and the SSH refusal names it). Budgets in KiB.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { labUnavailable } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { type LabGateway, type LabTenant, startLabGateway, startTenant } from '../helpers/lab-gateway.js';
import { openLiveSession, sshWithPassword, until } from '../helpers/openssh.js';
import { SseClient } from '../helpers/sse-client.js';

const KiB = 1024;
const THROTTLE = 32 * KiB;

describe('monthly egress budgets of a real workspace', {
  skip: labUnavailable() || needs('ssh', 'sshpass'),
  timeout: 900_000,
}, () => {
  const username = `budget${randomBytes(3).toString('hex')}`;
  let lab: LabGateway;
  let tenant: LabTenant;
  /** This month's bytes of the host or its user, as the meter has them. */
  const used = async (scope: 'host' | 'user') => {
    const totals = (await lab.t.request('GET', '/v1/admin/egress-traffic')).body;
    const rows = scope === 'host' ? totals.hosts : totals.users;
    const row = rows.find((r: { host_id?: string; user_id?: string }) =>
      scope === 'host' ? r.host_id === tenant.hostId : r.user_id === tenant.userId,
    );
    return row ? row.sent_bytes + row.received_bytes : 0;
  };
  const setBudget = async (scope: 'host' | 'user', body: Record<string, unknown>) => {
    const subject = scope === 'host' ? tenant.hostId : tenant.userId;
    const set = await lab.t.request('PUT', `/v1/admin/egress-budgets/${scope}/${subject}`, { body });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    return set.body;
  };
  /** Downloads `bytes` in the workspace as its user (ssh through the proxy); answers curl's bytes per second. */
  const download = async (bytes: number) => {
    const url = `${lab.lab.internet.httpUrl}/bytes/${bytes}`;
    const result = await sshWithPassword(
      tenant.port,
      tenant.sshPass,
      [
        `${tenant.login}@127.0.0.1`,
        `curl -sS --max-time 120 -o /dev/null -w '%{size_download} %{speed_download}' ${url}`,
      ],
      150_000,
    );
    assert.equal(result.code, 0, result.stderr);
    const [size, speed] = result.stdout.trim().split(' ').map(Number);
    assert.equal(size, bytes, result.stdout);
    return speed!;
  };

  before(async () => {
    lab = await startLabGateway({ EGRESS_METER_SECONDS: '1' });
    tenant = await startTenant(lab, username);
  });

  after(async () => {
    await lab?.close();
  });

  it('warns at its share (event, live stream, a line in the attached session), then notify only tells at the limit', async () => {
    const start = await used('host');
    const budget = await setBudget('host', {
      limit_bytes: start + 256 * KiB,
      warning_percent: 50,
      action: 'notify',
    });
    assert.equal(budget.state, 'under');
    assert.equal(budget.global_default, false);
    const sse = await SseClient.open(`${lab.t.url}/v1/admin/sse?token=${lab.t.adminToken}&topics=hosts`);
    const session = openLiveSession(tenant.port, tenant.sshPass, ['-tt', `${tenant.login}@127.0.0.1`]);
    try {
      session.child.stdin.write('echo $((6*7))ready\n');
      await until(
        'the session to open',
        () => session.lines.some((line) => line.includes('42ready')),
        30_000,
      );
      await download(160 * KiB);
      await until(
        'the warning event',
        async () => (await tenant.events('host.egress_budget_warning')).length > 0,
        30_000,
      );
      const [warning] = await tenant.events('host.egress_budget_warning');
      assert.equal(warning.data.scope, 'host');
      assert.equal(warning.data.action, 'notify');
      assert.ok(warning.data.used_bytes >= start + 128 * KiB, JSON.stringify(warning.data));
      assert.ok(warning.data.terminals_told >= 1, 'the attached terminal was told');
      await until(
        'the line in the attached terminal',
        () => session.stderr().includes('egress budget'),
        10_000,
      );
      assert.match(
        session.stderr(),
        /has used [\d.]+ KiB of the host's egress budget of [\d.]+ KiB for \d{4}-\d\d \(warning at 50 %\)/,
      );
      // The host on the live stream carries the warning (the banner); the stream may come a moment after.
      await until(
        'the warning on the live stream',
        () =>
          sse
            .messages()
            .map((m) => m.data)
            .some(
              (m) =>
                m.topic === 'hosts' && m.id === tenant.hostId && m.payload.egress?.budget?.state === 'warned',
            ),
        10_000,
      );
      assert.equal((await tenant.host()).egress.budget.state, 'warned');

      await download(128 * KiB);
      await until(
        'the limit event',
        async () => (await tenant.events('host.egress_budget_reached')).length > 0,
        30_000,
      );
      await until('the limit in the terminal', () => session.stderr().includes('reached the host'), 10_000);
      const now = await tenant.host();
      assert.equal(now.status, 'running', 'notify stops nothing');
      assert.equal(now.egress.throttle_bytes_per_second, null, 'notify holds nothing back');
      assert.equal(now.egress.budget.state, 'reached');
      const read = (await lab.t.request('GET', `/v1/admin/egress-budgets/host/${tenant.hostId}`)).body;
      assert.equal(read.state, 'reached');
      assert.ok(read.warned_at && read.reached_at, JSON.stringify(read));
      assert.equal((await tenant.events('host.egress_budget_warning')).length, 1, 'warned once');
    } finally {
      session.child.kill();
      sse.close();
    }
  });

  it('throttle holds the tunnel below its rate at the limit, and a raised budget lifts it', async () => {
    const free = await download(2048 * KiB);
    console.log(`# unthrottled: ${Math.round(free / KiB)} KiB/s`);
    assert.ok(free > 4 * THROTTLE, `the tunnel is fast enough to tell (${free} B/s)`);

    await setBudget('host', {
      limit_bytes: (await used('host')) + 64 * KiB,
      action: 'throttle',
      throttle_bytes_per_second: THROTTLE,
    });
    await download(128 * KiB);
    await until(
      'the throttle',
      async () => (await tenant.host()).egress.throttle_bytes_per_second === THROTTLE,
      30_000,
    );
    await until(
      'the throttled event',
      async () => (await tenant.events('host.egress_throttled')).length === 1,
      10_000,
    );
    assert.equal((await tenant.events('host.egress_throttled'))[0].data.bytes_per_second, THROTTLE);
    const held = await download(320 * KiB);
    console.log(`# throttled to ${THROTTLE / KiB} KiB/s: ${Math.round(held / KiB)} KiB/s`);
    // Below the rate set: the shaper counts whole frames, and lets only a burst of 4 KiB pass at once.
    assert.ok(held < THROTTLE, `throttled download at ${held} B/s, limit ${THROTTLE}`);

    const raised = await setBudget('host', {
      limit_bytes: (await used('host')) + 256 * 1024 * KiB,
      action: 'throttle',
      throttle_bytes_per_second: THROTTLE,
    });
    assert.equal(raised.state, 'under');
    assert.equal(
      (await tenant.host()).egress.throttle_bytes_per_second,
      null,
      'lifted as the budget was raised',
    );
    const again = await download(2048 * KiB);
    console.log(`# after raising the budget: ${Math.round(again / KiB)} KiB/s`);
    assert.ok(again > 4 * THROTTLE, `recovered: ${again} B/s`);
    assert.equal((await tenant.events('host.egress_throttle_lifted')).length, 1);
  });

  it("stop stops the host with the reason egress_budget at its owner's limit, and the SSH refusal names it", async () => {
    await setBudget('user', { limit_bytes: (await used('user')) + 64 * KiB, action: 'stop' });
    // The host may stop while the transfer runs.
    await sshWithPassword(
      tenant.port,
      tenant.sshPass,
      [
        `${tenant.login}@127.0.0.1`,
        `curl -sS --max-time 60 -o /dev/null ${lab.lab.internet.httpUrl}/bytes/${256 * KiB}`,
      ],
      90_000,
    );
    await until('the budget stop', async () => (await tenant.host()).status === 'stopped', 90_000);
    const [stop] = await tenant.events('host.policy_stop');
    assert.equal(stop.data.reason, 'egress_budget');
    const task = (await lab.t.request('GET', `/v1/admin/tasks/${stop.data.task_id}`)).body;
    assert.equal(task.kind, 'stop');
    assert.equal(task.status, 'succeeded');
    const [reached] = await tenant.events('host.egress_budget_reached');
    assert.equal(reached.data.scope, 'user');
    assert.equal(reached.data.action, 'stop');
    const refused = await sshWithPassword(
      tenant.port,
      tenant.sshPass,
      [`${tenant.login}@127.0.0.1`, 'true'],
      30_000,
    );
    assert.notEqual(refused.code, 0);
    assert.match(
      refused.stderr,
      /stopped by the gateway at \S+ for its egress budget, egress_budget: it reached its monthly egress budget/,
    );
  });
});
