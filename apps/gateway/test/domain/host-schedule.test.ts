import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { WorkspaceActivityProbe } from '../../src/runtime/workspace-activity.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/** A workspace that shows no activity at all: the schedule alone decides. */
const quietProbe: WorkspaceActivityProbe = {
  sample: async () => ({ cpuSeconds: 0, networkBytes: 0, pid: 1 }),
  terminalOutputAt: async () => null,
  tellTerminals: async () => {},
};

const MINUTE = 60_000;
/** HH:MM in UTC of an instant. */
const clockTime = (at: number) => new Date(at).toISOString().slice(11, 16);

for (const kind of DATABASES) {
  describe(`a host's weekly schedule, on a fake clock (${kind})`, () => {
    let t: TestGateway;
    // Starts near the real time: the lifecycle stamps started_at with it, and plans count from there.
    let now = Math.ceil(Date.now() / MINUTE) * MINUTE + MINUTE;
    const startAt = now + 5 * MINUTE;
    const stopAt = startAt + 30 * MINUTE;

    before(async () => {
      t = await startTestGateway(kind, { HOST_STOP_WARNING_SECONDS: '600' }, undefined, {
        activityProbe: quietProbe,
        clock: () => now,
      });
    });
    after(() => t?.close());

    const round = () => t.gateway.lifecycleScheduler.round();
    const host = async (id: string) => (await t.request('GET', `/v1/admin/hosts/${id}`)).body;
    const events = async (id: string, type: string) =>
      (await t.request('GET', `/v1/admin/events?host_id=${id}&type=${type}`)).body.events;
    /** A series of /metrics by its name and labels as printed (`name{reason="schedule"}`). */
    const metric = async (series: string) => {
      const text = (await t.request('GET', '/metrics')).body as string;
      const line = text.split('\n').find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.slice(series.length + 1));
    };

    it('starts the stopped host at its start time and stops it at its stop time, warned ahead', async () => {
      const user = await t.createUser('scheduled');
      const egress = await t.createEgressIp('198.51.100.90');
      const created = await t.createHost(user.id, egress, { start: false });
      const schedule = {
        time_zone: 'UTC',
        days: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'],
        start: clockTime(startAt),
        stop: clockTime(stopAt),
      };
      const set = await t.request('PUT', `/v1/admin/hosts/${created.id}/lifecycle-policy`, {
        body: { idle_timeout_seconds: null, max_lifetime_seconds: null, schedule },
      });
      assert.equal(set.status, 200, JSON.stringify(set.body));
      assert.deepEqual(set.body.effective.schedule, schedule);

      await round();
      assert.equal((await host(created.id)).status, 'created');
      assert.equal(
        (await host(created.id)).lifecycle.planned_start_at,
        new Date(startAt).toISOString().replace('.000Z', 'Z'),
      );

      now = startAt - 1000;
      await round();
      await t.gateway.tasks.idle();
      assert.equal((await host(created.id)).status, 'created', 'not a second early');

      now = startAt + 1000;
      await round();
      await t.gateway.tasks.idle();
      assert.equal((await host(created.id)).status, 'running', 'started at its time');
      assert.equal((await events(created.id, 'host.scheduled_start')).length, 1);

      await round();
      const running = await host(created.id);
      assert.equal(running.lifecycle.planned_stop.reason, 'schedule');
      assert.equal(Date.parse(running.lifecycle.planned_stop.at), stopAt);
      assert.equal(running.lifecycle.planned_stop.warned_at, null);

      now = stopAt - 10 * MINUTE - 1000;
      await round();
      assert.equal((await events(created.id, 'host.stop_warning')).length, 0, 'not warned before its time');

      now = stopAt - 10 * MINUTE;
      await round();
      const warnings = await events(created.id, 'host.stop_warning');
      assert.equal(warnings.length, 1);
      assert.equal(warnings[0].data.reason, 'schedule');
      assert.match(warnings[0].message, /stops in about 10 min/);
      assert.equal((await host(created.id)).status, 'running');
      assert.equal(await metric('ccp_host_stop_warnings_total{reason="schedule"}'), 1);
      assert.equal(await metric('ccp_host_policy_stops_total{reason="schedule"}'), 0);

      now = stopAt - 1000;
      await round();
      await t.gateway.tasks.idle();
      assert.equal((await host(created.id)).status, 'running', 'not a second early');

      now = stopAt;
      await round();
      await t.gateway.tasks.idle();
      const stopped = await host(created.id);
      assert.equal(stopped.status, 'stopped', 'stopped at its time');
      const [stop] = await events(created.id, 'host.policy_stop');
      assert.equal(stop.data.reason, 'schedule');
      const task = (await t.request('GET', `/v1/admin/tasks/${stop.data.task_id}`)).body;
      assert.equal(task.kind, 'stop', 'an ordinary stop task');
      assert.equal(task.requested_by, 'system');
      assert.equal(await metric('ccp_host_policy_stops_total{reason="schedule"}'), 1);
      assert.equal(await metric('ccp_host_policy_stops_total{reason="idle"}'), 0);

      await round();
      assert.equal(
        Date.parse((await host(created.id)).lifecycle.planned_start_at),
        startAt + 24 * 60 * MINUTE,
        "the next start is tomorrow's",
      );
    });

    it("a user's defaults apply to their hosts field by field, under the host's own and over the gateway's", async () => {
      const user = await t.createUser('defaults');
      const created = await t.createHost(user.id, await t.createEgressIp('198.51.100.92'), { start: false });
      const set = await t.request('PUT', `/v1/admin/users/${user.id}/host-policy`, {
        body: { idle_timeout_seconds: 1800, max_lifetime_seconds: 28_800, schedule: null },
      });
      assert.equal(set.status, 200, JSON.stringify(set.body));
      await t.request('PUT', `/v1/admin/hosts/${created.id}/lifecycle-policy`, {
        body: { idle_timeout_seconds: 600, max_lifetime_seconds: null, schedule: null },
      });
      const policies = (await t.request('GET', `/v1/admin/hosts/${created.id}/lifecycle-policy`)).body;
      assert.deepEqual(policies.effective, {
        idle_timeout_seconds: 600,
        max_lifetime_seconds: 28_800,
        schedule: null,
      });
      assert.deepEqual(policies.global, { idle_timeout_seconds: 0, max_lifetime_seconds: 0, schedule: null });
      assert.deepEqual((await t.request('GET', `/v1/admin/users/${user.id}/host-policy`)).body, set.body);
      // Only admins set policies; the owner may extend, never change them.
      const own = await t.request('PUT', `/v1/admin/hosts/${created.id}/lifecycle-policy`, {
        token: user.token,
        body: { idle_timeout_seconds: 0, max_lifetime_seconds: 0, schedule: null },
      });
      assert.equal(own.status, 403);
      const notRunning = await t.request('POST', `/v1/user/hosts/${created.id}/extend`, {
        token: user.token,
      });
      assert.equal(notRunning.status, 409);
      assert.equal(notRunning.body.code, 'host_not_running');
    });

    it('refuses a schedule in a time zone that does not exist, saying what to use', async () => {
      const user = await t.createUser('typo');
      const created = await t.createHost(user.id, await t.createEgressIp('198.51.100.91'), { start: false });
      const refused = await t.request('PUT', `/v1/admin/hosts/${created.id}/lifecycle-policy`, {
        body: {
          idle_timeout_seconds: null,
          max_lifetime_seconds: null,
          schedule: { time_zone: 'Europe/Berln', days: ['mon'], start: '08:00', stop: null },
        },
      });
      assert.equal(refused.status, 400);
      assert.deepEqual(refused.body.details, [
        {
          field: 'schedule.time_zone',
          message: 'unknown time zone "Europe/Berln"; use an IANA name such as Europe/Berlin or UTC',
        },
      ]);
    });
  });
}
