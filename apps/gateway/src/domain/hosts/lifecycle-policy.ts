import type {
  ActivitySignal,
  EffectiveLifecyclePolicy,
  LifecyclePolicy,
  StopReason,
  Weekday,
  WeeklySchedule,
} from '@ccp/api';

/*
 * The pure decisions of a host's lifecycle policy: which policy holds, whether the workspace is active, when the
 * next stop or start falls, and whether to warn or stop now. Times are milliseconds since the epoch; nothing here
 * reads a clock, a database or an engine.
 */

/** A host's own policy over its owner's defaults over the gateway's: the first value that is not null. */
export function effectivePolicy(
  host: LifecyclePolicy,
  user: LifecyclePolicy,
  global: LifecyclePolicy,
): EffectiveLifecyclePolicy {
  const schedule = host.schedule ?? user.schedule ?? global.schedule;
  return {
    idle_timeout_seconds:
      host.idle_timeout_seconds ?? user.idle_timeout_seconds ?? global.idle_timeout_seconds ?? 0,
    max_lifetime_seconds:
      host.max_lifetime_seconds ?? user.max_lifetime_seconds ?? global.max_lifetime_seconds ?? 0,
    // One with neither time is how a level turns an inherited schedule off.
    schedule: schedule && (schedule.start || schedule.stop) ? schedule : null,
  };
}

/** What one round saw of a running workspace. */
export interface ActivityReading {
  /** The newest output any tmux pane printed (tmux's window_activity), or null without tmux. */
  terminalOutputAt: number | null;
  /** CPU time the workspace used since the previous reading, in seconds, and over how long; null on the first. */
  cpu: { usedSeconds: number; elapsedSeconds: number } | null;
  /** Bytes through the workspace's link to its egress gateway since the previous reading; null on the first. */
  networkBytes: number | null;
}

export interface ActivityThresholds {
  /** Percent of one CPU above which the workspace counts as busy. */
  cpuPercent: number;
  /** Bytes between two readings at or above which the workspace counts as busy. */
  networkBytes: number;
}

export interface Activity {
  at: number;
  signal: ActivitySignal;
}

/**
 * The activity a reading shows, or null when it shows none: CPU or network use counts as activity now; terminal output at the time tmux recorded it, when that is newer than what was known.
 */
export function activityOf(
  reading: ActivityReading,
  now: number,
  known: number | null,
  thresholds: ActivityThresholds,
): Activity | null {
  const { cpu } = reading;
  if (cpu && cpu.elapsedSeconds > 0 && (cpu.usedSeconds / cpu.elapsedSeconds) * 100 >= thresholds.cpuPercent)
    return { at: now, signal: 'cpu' };
  if (reading.networkBytes !== null && reading.networkBytes >= thresholds.networkBytes)
    return { at: now, signal: 'network' };
  const output = reading.terminalOutputAt === null ? null : Math.min(reading.terminalOutputAt, now);
  if (output !== null && (known === null || output > known)) return { at: output, signal: 'terminal' };
  return null;
}

/** What a running host's stop is planned from. */
export interface RunningHost {
  startedAt: number;
  lastActivityAt: number | null;
  /** Until when an extend holds off every stop. */
  extendedUntil: number | null;
}

export interface PlannedStop {
  at: number;
  reason: StopReason;
}

/**
 * The first stop the policy plans for a running host: idle (its timeout after the later of its start and its last
 * activity), lifetime (after its start), schedule (the first stop time after its start, so a host started after
 * hours runs until the next one). An extend moves whichever comes first to its end.
 */
export function plannedStop(policy: EffectiveLifecyclePolicy, host: RunningHost): PlannedStop | null {
  const candidates: PlannedStop[] = [];
  if (policy.idle_timeout_seconds > 0) {
    const since = Math.max(host.startedAt, host.lastActivityAt ?? host.startedAt);
    candidates.push({ at: since + policy.idle_timeout_seconds * 1000, reason: 'idle' });
  }
  if (policy.max_lifetime_seconds > 0)
    candidates.push({ at: host.startedAt + policy.max_lifetime_seconds * 1000, reason: 'lifetime' });
  const scheduled = policy.schedule && nextScheduled(policy.schedule, 'stop', host.startedAt);
  if (scheduled) candidates.push({ at: scheduled, reason: 'schedule' });
  if (candidates.length === 0) return null;
  const first = candidates.reduce((a, b) => (b.at < a.at ? b : a));
  return host.extendedUntil !== null && host.extendedUntil > first.at
    ? { ...first, at: host.extendedUntil }
    : first;
}

export type StopDecision =
  | { action: 'none' }
  | { action: 'warn'; stopAt: number }
  | { action: 'stop'; reason: StopReason };

/**
 * What to do about a planned stop now. A stop always comes a full warning after users were told: a warning due
 * later than planned (an extend that ran out, a round that came late) moves the stop, never skips the warning.
 */
export function stopDecision(
  plan: PlannedStop | null,
  warnedAt: number | null,
  now: number,
  warningSeconds: number,
): StopDecision {
  if (!plan) return { action: 'none' };
  const warning = warningSeconds * 1000;
  if (now < plan.at - warning) return { action: 'none' };
  if (warnedAt === null) return { action: 'warn', stopAt: Math.max(plan.at, now + warning) };
  if (now >= Math.max(plan.at, warnedAt + warning)) return { action: 'stop', reason: plan.reason };
  return { action: 'none' };
}

/** When an extend asked at `now` holds stops off until: `seconds` past the planned stop, or past now if later. */
export function extendedUntil(plan: PlannedStop | null, now: number, seconds: number): number {
  return Math.max(plan?.at ?? now, now) + seconds * 1000;
}

/** Whether a schedule start time fell in (since, now]: a round that passes one starts the stopped host. */
export function scheduledStartDue(schedule: WeeklySchedule | null, since: number, now: number): boolean {
  if (!schedule?.start) return false;
  const next = nextScheduled(schedule, 'start', since);
  return next !== null && next <= now;
}

const WEEKDAYS: Weekday[] = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];

/** The first start or stop time of the schedule strictly after `after`, or null when it has none. */
export function nextScheduled(
  schedule: WeeklySchedule,
  which: 'start' | 'stop',
  after: number,
): number | null {
  const time = schedule[which];
  if (!time) return null;
  const [hour, minute] = time.split(':').map(Number) as [number, number];
  const today = wallClock(schedule.time_zone, after);
  // Eight days: today's time may have passed, and a week later is the same weekday again.
  for (let day = 0; day <= 7; day++) {
    const date = new Date(Date.UTC(today.year, today.month - 1, today.day + day));
    if (!schedule.days.includes(WEEKDAYS[date.getUTCDay()]!)) continue;
    const at = instantOf(
      schedule.time_zone,
      date.getUTCFullYear(),
      date.getUTCMonth() + 1,
      date.getUTCDate(),
      hour,
      minute,
    );
    if (at > after) return at;
  }
  return null;
}

/** Whether the name is a time zone this machine knows. */
export function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

interface WallClock {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

const formats = new Map<string, Intl.DateTimeFormat>();

/** The date and time a clock in the zone shows at an instant. */
function wallClock(timeZone: string, at: number): WallClock {
  let format = formats.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formats.set(timeZone, format);
  }
  const parts = Object.fromEntries(
    format.formatToParts(new Date(at)).map((part) => [part.type, Number(part.value)]),
  ) as Record<string, number>;
  return {
    year: parts.year!,
    month: parts.month!,
    day: parts.day!,
    hour: parts.hour!,
    minute: parts.minute!,
    second: parts.second!,
  };
}

/** How far the zone's clock is ahead of UTC at an instant, in milliseconds. */
function offsetAt(timeZone: string, at: number): number {
  const c = wallClock(timeZone, at);
  return Date.UTC(c.year, c.month - 1, c.day, c.hour, c.minute, c.second) - Math.floor(at / 1000) * 1000;
}

/**
 * The instant a clock in the zone shows the given time (one of the two in an overlap); in a daylight-saving
 * gap (a time no clock shows), the instant just past the gap.
 */
function instantOf(
  timeZone: string,
  year: number,
  month: number,
  day: number,
  hour: number,
  minute: number,
): number {
  const asUtc = Date.UTC(year, month - 1, day, hour, minute);
  const first = asUtc - offsetAt(timeZone, asUtc);
  const second = asUtc - offsetAt(timeZone, first);
  const shows = (at: number) => {
    const clock = wallClock(timeZone, at);
    return clock.hour === hour && clock.minute === minute;
  };
  const exact = [first, second].filter(shows);
  return exact.length > 0 ? Math.min(...exact) : Math.max(first, second);
}
