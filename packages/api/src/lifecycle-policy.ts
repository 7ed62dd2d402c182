import Type from 'typebox';
import { NullableTimestamp, Timestamp } from './common.js';

export const Weekday = Type.Union([
  Type.Literal('mon'),
  Type.Literal('tue'),
  Type.Literal('wed'),
  Type.Literal('thu'),
  Type.Literal('fri'),
  Type.Literal('sat'),
  Type.Literal('sun'),
]);

const ClockTime = Type.String({ pattern: '^([01][0-9]|2[0-3]):[0-5][0-9]$', description: 'HH:MM, 24-hour' });

/** A weekly schedule: on its days, a stopped host starts at `start` and a running one stops at `stop`. */
export const WeeklySchedule = Type.Object(
  {
    time_zone: Type.String({
      minLength: 1,
      maxLength: 64,
      description: 'IANA time zone the times are read in, such as Europe/Berlin or UTC',
    }),
    days: Type.Array(Weekday, { minItems: 1, maxItems: 7, uniqueItems: true }),
    start: Type.Union([ClockTime, Type.Null()], {
      description: 'When a stopped host starts on those days; null: never by the schedule',
    }),
    stop: Type.Union([ClockTime, Type.Null()], {
      description: 'When a running host stops on those days (after a warning); null: never by the schedule',
    }),
  },
  { additionalProperties: false },
);

const Seconds = (description: string) =>
  Type.Union([Type.Integer({ minimum: 0, maximum: 366 * 86_400 }), Type.Null()], { description });

/**
 * What keeps a host's cost in check. Each field left null is inherited: a host's from its owner's defaults, those
 * from the gateway's settings (HOST_IDLE_TIMEOUT_SECONDS, HOST_MAX_LIFETIME_SECONDS, HOST_SCHEDULE).
 */
export const LifecyclePolicy = Type.Object(
  {
    idle_timeout_seconds: Seconds(
      'Stop after this long without activity (input in a session, terminal output, CPU or network use; a session open but unused is none); 0: never',
    ),
    max_lifetime_seconds: Seconds('Stop this long after each start, busy or not; 0: never'),
    schedule: Type.Union([WeeklySchedule, Type.Null()], {
      description: 'Weekly start and stop times; one with neither start nor stop turns an inherited one off',
    }),
  },
  { additionalProperties: false },
);

/** The policy a host follows now: its own, its owner's and the gateway's, field by field. */
export const EffectiveLifecyclePolicy = Type.Object({
  idle_timeout_seconds: Type.Integer({ description: '0: no idle stop' }),
  max_lifetime_seconds: Type.Integer({ description: '0: no maximum lifetime' }),
  schedule: Type.Union([WeeklySchedule, Type.Null()]),
});

export const LifecyclePolicies = Type.Object({
  host: LifecyclePolicy,
  user: LifecyclePolicy,
  global: LifecyclePolicy,
  effective: EffectiveLifecyclePolicy,
});

export const StopReason = Type.Union([
  Type.Literal('idle'),
  Type.Literal('lifetime'),
  Type.Literal('schedule'),
  Type.Literal('egress_budget'),
]);

export const ActivitySignal = Type.Union(
  [Type.Literal('session'), Type.Literal('terminal'), Type.Literal('cpu'), Type.Literal('network')],
  {
    description:
      "session: a person's input went through an SSH, ccp, browser terminal or desktop session (keys, a mounted " +
      "folder's or a forwarded port's data, pointer); terminal: a tmux pane printed; cpu: the workspace used " +
      'CPU past HOST_ACTIVE_CPU_PERCENT; network: bytes went through its egress gateway',
  },
);

/** A host's activity and the stop or start its policy plans next, as the gateway's last round found them. */
export const HostLifecycleState = Type.Object({
  policy: LifecyclePolicy,
  last_activity_at: NullableTimestamp,
  last_activity_signal: Type.Union([ActivitySignal, Type.Null()]),
  planned_stop: Type.Union(
    [
      Type.Object({
        at: Timestamp,
        reason: StopReason,
        warned_at: Type.Union([Timestamp, Type.Null()], {
          description: 'When users were told (event, live message, attached SSH sessions); null: not yet',
        }),
      }),
      Type.Null(),
    ],
    { description: 'The stop the policy plans while the host runs; extend moves it' },
  ),
  planned_start_at: Type.Union([Timestamp, Type.Null()], {
    description: 'When the schedule starts the stopped host next',
  }),
});

export const ExtendRequest = Type.Object(
  {
    seconds: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 7 * 86_400,
        description:
          'How far from now (or from the planned stop, if later) to hold off stops; HOST_EXTEND_SECONDS',
      }),
    ),
  },
  { additionalProperties: false },
);

export type Weekday = Type.Static<typeof Weekday>;
export type WeeklySchedule = Type.Static<typeof WeeklySchedule>;
export type LifecyclePolicy = Type.Static<typeof LifecyclePolicy>;
export type EffectiveLifecyclePolicy = Type.Static<typeof EffectiveLifecyclePolicy>;
export type LifecyclePolicies = Type.Static<typeof LifecyclePolicies>;
export type StopReason = Type.Static<typeof StopReason>;
export type ActivitySignal = Type.Static<typeof ActivitySignal>;
export type HostLifecycleState = Type.Static<typeof HostLifecycleState>;
export type ExtendRequest = Type.Static<typeof ExtendRequest>;
