import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EffectiveLifecyclePolicy, LifecyclePolicy, WeeklySchedule } from '@ccp/api';
import {
  activityOf,
  effectivePolicy,
  extendedUntil,
  isTimeZone,
  nextScheduled,
  plannedStop,
  scheduledStartDue,
  stopDecision,
} from '../../src/domain/hosts/lifecycle-policy.js';

const at = (iso: string) => Date.parse(iso);
const unset: LifecyclePolicy = { idle_timeout_seconds: null, max_lifetime_seconds: null, schedule: null };
const policy = (p: Partial<EffectiveLifecyclePolicy>): EffectiveLifecyclePolicy => ({
  idle_timeout_seconds: 0,
  max_lifetime_seconds: 0,
  schedule: null,
  ...p,
});
const thresholds = { cpuPercent: 5, networkBytes: 4096 };
const quiet = {
  terminalOutputAt: null,
  cpu: { usedSeconds: 0.01, elapsedSeconds: 60 },
  networkBytes: 0,
};
const weekdays: WeeklySchedule = {
  time_zone: 'Europe/Berlin',
  days: ['mon', 'tue', 'wed', 'thu', 'fri'],
  start: '08:00',
  stop: '19:00',
};

describe('effectivePolicy', () => {
  it('takes the host’s value, else its owner’s, else the gateway’s, field by field; none at all is off', () => {
    const result = effectivePolicy(
      { ...unset, idle_timeout_seconds: 600 },
      { ...unset, idle_timeout_seconds: 60, max_lifetime_seconds: 3600 },
      { ...unset, max_lifetime_seconds: 7200, schedule: weekdays },
    );
    assert.deepEqual(result, { idle_timeout_seconds: 600, max_lifetime_seconds: 3600, schedule: weekdays });
    assert.deepEqual(effectivePolicy(unset, unset, unset), policy({}));
  });

  it('0 at the host turns an inherited timeout off; a schedule with no times turns an inherited one off', () => {
    const off = { ...weekdays, start: null, stop: null };
    const result = effectivePolicy(
      { idle_timeout_seconds: 0, max_lifetime_seconds: null, schedule: off },
      { ...unset, idle_timeout_seconds: 60, schedule: weekdays },
      unset,
    );
    assert.deepEqual(result, policy({}));
  });
});

describe('activityOf', () => {
  const now = at('2026-11-26T12:00:00Z');
  it('CPU above the threshold between two readings is activity; below it is not', () => {
    assert.deepEqual(
      activityOf({ ...quiet, cpu: { usedSeconds: 3.1, elapsedSeconds: 60 } }, now, null, thresholds),
      {
        at: now,
        signal: 'cpu',
      },
    );
    assert.equal(
      activityOf({ ...quiet, cpu: { usedSeconds: 2.9, elapsedSeconds: 60 } }, now, null, thresholds),
      null,
    );
    assert.equal(
      activityOf({ ...quiet, cpu: null }, now, null, thresholds),
      null,
      'a first reading has no rate',
    );
  });

  it('bytes through the egress gateway at or above the threshold are activity', () => {
    assert.equal(activityOf({ ...quiet, networkBytes: 4096 }, now, null, thresholds)?.signal, 'network');
    assert.equal(activityOf({ ...quiet, networkBytes: 4095 }, now, null, thresholds), null);
  });

  it('terminal output counts at the time tmux saw it, only when newer than the activity known', () => {
    const output = now - 20_000;
    assert.deepEqual(activityOf({ ...quiet, terminalOutputAt: output }, now, null, thresholds), {
      at: output,
      signal: 'terminal',
    });
    assert.equal(activityOf({ ...quiet, terminalOutputAt: output }, now, output, thresholds), null);
    assert.equal(
      activityOf({ ...quiet, terminalOutputAt: now + 60_000 }, now, null, thresholds)?.at,
      now,
      'a clock ahead in the workspace is not the future',
    );
  });
});

describe('plannedStop', () => {
  const startedAt = at('2026-11-26T10:00:00Z'); // a Thursday, 11:00 in Berlin
  const running = { startedAt, lastActivityAt: null, extendedUntil: null };

  it('no policy plans no stop', () => {
    assert.equal(plannedStop(policy({}), running), null);
  });

  it('idle: the timeout after the last activity, or after the start when there was none since', () => {
    const p = policy({ idle_timeout_seconds: 1800 });
    assert.deepEqual(plannedStop(p, running), { at: startedAt + 1_800_000, reason: 'idle' });
    const active = startedAt + 3_600_000;
    assert.deepEqual(plannedStop(p, { ...running, lastActivityAt: active }), {
      at: active + 1_800_000,
      reason: 'idle',
    });
    assert.deepEqual(
      plannedStop(p, { ...running, lastActivityAt: startedAt - 86_400_000 }),
      { at: startedAt + 1_800_000, reason: 'idle' },
      'activity before this start does not count',
    );
  });

  it('lifetime: the maximum after the start however busy; the earliest reason wins', () => {
    const p = policy({ idle_timeout_seconds: 1800, max_lifetime_seconds: 7200 });
    const busy = { ...running, lastActivityAt: startedAt + 7_000_000 };
    assert.deepEqual(plannedStop(p, busy), { at: startedAt + 7_200_000, reason: 'lifetime' });
  });

  it('schedule: the first stop time after the start, in the schedule’s zone', () => {
    assert.deepEqual(plannedStop(policy({ schedule: weekdays }), running), {
      at: at('2026-11-26T18:00:00Z'),
      reason: 'schedule',
    });
    // Started on Friday after 19:00 Berlin time: the next stop is Monday's.
    const lateFriday = { ...running, startedAt: at('2026-11-27T19:30:00Z') };
    assert.deepEqual(plannedStop(policy({ schedule: weekdays }), lateFriday), {
      at: at('2026-11-30T18:00:00Z'),
      reason: 'schedule',
    });
  });

  it('an extend moves the first stop to its end, keeping the reason; one that ended changes nothing', () => {
    const p = policy({ idle_timeout_seconds: 1800 });
    const until = startedAt + 5_000_000;
    assert.deepEqual(plannedStop(p, { ...running, extendedUntil: until }), { at: until, reason: 'idle' });
    assert.deepEqual(plannedStop(p, { ...running, extendedUntil: startedAt }), {
      at: startedAt + 1_800_000,
      reason: 'idle',
    });
  });
});

describe('stopDecision', () => {
  const plan = { at: at('2026-11-26T12:00:00Z'), reason: 'idle' as const };
  const warning = 600;

  it('nothing before the warning time; a warning once it comes; the stop at the planned time', () => {
    assert.deepEqual(stopDecision(plan, null, plan.at - 601_000, warning), { action: 'none' });
    assert.deepEqual(stopDecision(plan, null, plan.at - 600_000, warning), {
      action: 'warn',
      stopAt: plan.at,
    });
    const warnedAt = plan.at - 600_000;
    assert.deepEqual(stopDecision(plan, warnedAt, plan.at - 1, warning), { action: 'none' });
    assert.deepEqual(stopDecision(plan, warnedAt, plan.at, warning), { action: 'stop', reason: 'idle' });
    assert.deepEqual(stopDecision(null, warnedAt, plan.at, warning), { action: 'none' });
  });

  it('never stops without a full warning first: a late warning moves the stop', () => {
    const late = plan.at + 30_000;
    assert.deepEqual(stopDecision(plan, null, late, warning), { action: 'warn', stopAt: late + 600_000 });
    assert.deepEqual(stopDecision(plan, late, late + 599_000, warning), { action: 'none' });
    assert.deepEqual(stopDecision(plan, late, late + 600_000, warning), { action: 'stop', reason: 'idle' });
  });
});

describe('extendedUntil', () => {
  it('adds the extension to the planned stop, or to now when that has passed or none is planned', () => {
    const now = at('2026-11-26T12:00:00Z');
    assert.equal(extendedUntil({ at: now + 60_000, reason: 'idle' }, now, 3600), now + 3_660_000);
    assert.equal(extendedUntil({ at: now - 60_000, reason: 'idle' }, now, 3600), now + 3_600_000);
    assert.equal(extendedUntil(null, now, 60), now + 60_000);
  });
});

describe('weekly schedule', () => {
  it('finds the next start on a listed day in the zone, skipping the weekend', () => {
    // Friday 2026-11-27 09:00 in Berlin: today's start has passed; Monday's is next.
    assert.equal(nextScheduled(weekdays, 'start', at('2026-11-27T08:00:00Z')), at('2026-11-30T07:00:00Z'));
    assert.equal(nextScheduled(weekdays, 'start', at('2026-11-27T06:59:00Z')), at('2026-11-27T07:00:00Z'));
    assert.equal(nextScheduled({ ...weekdays, start: null }, 'start', at('2026-11-27T06:59:00Z')), null);
  });

  it('follows daylight saving time: 08:00 in Berlin is 06:00 UTC in summer', () => {
    assert.equal(nextScheduled(weekdays, 'start', at('2026-07-01T00:00:00Z')), at('2026-07-01T06:00:00Z'));
    // 02:30 does not exist on 2026-03-29 in Berlin: the start falls just past the gap (03:30 CEST).
    const sunday = { ...weekdays, days: ['sun' as const], start: '02:30' };
    assert.equal(nextScheduled(sunday, 'start', at('2026-03-28T12:00:00Z')), at('2026-03-29T01:30:00Z'));
  });

  it('a start is due once a round passes its time, and only in that round', () => {
    const startAt = at('2026-11-27T07:00:00Z');
    assert.equal(scheduledStartDue(weekdays, startAt - 1000, startAt - 1), false);
    assert.equal(scheduledStartDue(weekdays, startAt - 1000, startAt), true);
    assert.equal(scheduledStartDue(weekdays, startAt, startAt + 1000), false);
    assert.equal(scheduledStartDue(null, startAt - 1000, startAt), false);
  });

  it('knows a time zone from a typo', () => {
    assert.equal(isTimeZone('Europe/Berlin'), true);
    assert.equal(isTimeZone('UTC'), true);
    assert.equal(isTimeZone('Europe/Berln'), false);
  });
});
