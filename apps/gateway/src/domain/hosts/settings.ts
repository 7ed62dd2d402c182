import { type LifecyclePolicy, WeeklySchedule } from '@ccp/api';
import Type, { type Static } from 'typebox';
import Value from 'typebox/value';
import { positiveNumber, positiveWhole, wholeNumber } from '../../shared/settings.js';
import { isTimeZone } from './lifecycle-policy.js';
import type { HostLifecycleSettings } from './lifecycle-scheduler.js';

const SCHEDULE_EXAMPLE =
  '{"time_zone":"Europe/Berlin","days":["mon","tue","wed","thu","fri"],"start":"08:00","stop":"20:00"}';

/** The rounds that keep running hosts in check, and their lifecycle policy (docs/configuration.md is written from these). */
export const HostsVariables = Type.Object({
  HOST_CHECK_SECONDS: wholeNumber(
    30,
    "How often (seconds) this node's running hosts are compared with its engine: one found not running twice in a row is `failed`; `0` turns it off",
  ),
  EGRESS_HEALTH_SECONDS: wholeNumber(
    60,
    'How often (seconds) the upstreams of running hosts are checked; `0` turns it off',
  ),
  HOST_ACTIVITY_SECONDS: wholeNumber(
    60,
    "How often (seconds) each running host's activity is read and its lifecycle policy applied (idle stop, lifetime, schedule); `0` turns the policy off",
  ),
  HOST_IDLE_TIMEOUT_SECONDS: wholeNumber(
    0,
    'Global default idle timeout (seconds; `0`: never): no input in a session, tmux output, CPU or network use for this long, and a host is warned, then stopped',
  ),
  HOST_MAX_LIFETIME_SECONDS: wholeNumber(
    0,
    'Global default maximum lifetime (seconds; `0`: never): a host is warned, then stopped this long after each start, busy or not',
  ),
  HOST_SCHEDULE: Type.Optional(
    Type.String({
      typeText: 'JSON',
      description: `Global default weekly schedule, such as \`${SCHEDULE_EXAMPLE}\`; a stopped host starts at \`start\`, a running one stops at \`stop\` (\`null\`: never)`,
    }),
  ),
  HOST_STOP_WARNING_SECONDS: wholeNumber(
    600,
    'How long (seconds) before a policy stop users are told: an event, a live message, a line in attached terminals and tmux, a banner',
  ),
  HOST_EXTEND_SECONDS: positiveWhole(
    3600,
    'How far (seconds) an extend (API, Extend button, `ccp extend`) moves the stop when it does not say',
  ),
  HOST_ACTIVE_CPU_PERCENT: positiveNumber(
    5,
    'CPU use (percent of one CPU) between two readings above which a workspace counts as active',
  ),
  HOST_ACTIVE_NETWORK_BYTES: positiveWhole(
    4096,
    "Bytes between two readings on the workspace's link to its egress gateway from which it counts as active",
  ),
});
export type HostsVariables = Static<typeof HostsVariables>;

/** The lifecycle policy's settings from the variables read, HOST_SCHEDULE's JSON checked here. */
export function hostLifecycleSettings(variables: HostsVariables, problems: string[]): HostLifecycleSettings {
  return {
    defaults: {
      idle_timeout_seconds: variables.HOST_IDLE_TIMEOUT_SECONDS,
      max_lifetime_seconds: variables.HOST_MAX_LIFETIME_SECONDS,
      schedule: parseSchedule(variables.HOST_SCHEDULE, problems),
    } satisfies LifecyclePolicy,
    warningSeconds: variables.HOST_STOP_WARNING_SECONDS,
    extendSeconds: variables.HOST_EXTEND_SECONDS,
    roundSeconds: variables.HOST_ACTIVITY_SECONDS,
    thresholds: {
      cpuPercent: variables.HOST_ACTIVE_CPU_PERCENT,
      networkBytes: variables.HOST_ACTIVE_NETWORK_BYTES,
    },
  };
}

function parseSchedule(raw: string | undefined, problems: string[]): WeeklySchedule | null {
  if (!raw?.trim()) return null;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    problems.push(`HOST_SCHEDULE must be JSON such as ${SCHEDULE_EXAMPLE} (got "${raw}")`);
    return null;
  }
  if (!Value.Check(WeeklySchedule, value)) {
    problems.push(
      `HOST_SCHEDULE must have time_zone, days (mon…sun), start and stop (HH:MM or null), such as ${SCHEDULE_EXAMPLE}`,
    );
    return null;
  }
  if (!isTimeZone(value.time_zone)) {
    problems.push(
      `HOST_SCHEDULE's time_zone "${value.time_zone}" is not a time zone; use an IANA name such as Europe/Berlin or UTC`,
    );
    return null;
  }
  return value;
}
