import Type from 'typebox';

/** Lowercase UUID of any stored resource. */
export const Uuid = Type.String({ format: 'uuid', description: 'Lowercase UUID' });

/** RFC 3339 timestamp; output is always UTC with `Z`, input may carry any offset. */
export const Timestamp = Type.String({ format: 'date-time', description: 'RFC 3339 timestamp' });

export const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

const SHORT_ID = '^[a-hjkmnp-z2-9]{8}$';

export const ShortId = Type.String({
  pattern: SHORT_ID,
  description: '8 characters from a-z and 2-9 without look-alikes',
});

/** A user's short ID: the same form as a host's, but no route takes it. */
export const UserShortId = Type.String({
  pattern: SHORT_ID,
  description:
    "The user's own short ID (8 characters from a-z and 2-9 without look-alikes), unique and never changed: a name shorter than the UUID for logs and support. No route takes it; hosts have short IDs of their own",
});

export const ErrorDetail = Type.Object({ field: Type.String(), message: Type.String() });

/** The one error body every endpoint answers with; some conflicts add fields such as `host_ids`. */
export const ErrorBody = Type.Object({
  error: Type.String({ description: 'Human-readable message' }),
  code: Type.String({ description: 'snake_case error code' }),
  details: Type.Optional(Type.Array(ErrorDetail)),
  retry_after: Type.Optional(Type.Integer()),
  host_ids: Type.Optional(Type.Array(Uuid)),
  task_id: Type.Optional(Uuid),
  task_error: Type.Optional(
    Type.Object(
      { code: Type.String(), message: Type.String() },
      { description: 'with `task_failed`: why the awaited task failed' },
    ),
  ),
  hosts: Type.Optional(
    Type.Array(Type.String(), { description: 'with `host_ambiguous`: the short IDs to choose from' }),
  ),
  progress: Type.Optional(Type.Integer({ description: 'with `not_ready`: the task progress' })),
  quota: Type.Optional(
    Type.String({
      description: 'with `quota_exceeded`: the quota (hosts, running_hosts, cpus, memory_mb, home_mb)',
    }),
  ),
  limit: Type.Optional(Type.Number({ description: 'with `quota_exceeded`: the quota' })),
  used: Type.Optional(Type.Number({ description: 'with `quota_exceeded`: what the user has of it now' })),
  requested: Type.Optional(
    Type.Number({ description: 'with `quota_exceeded`: what the refused call would add' }),
  ),
  api_url: Type.Optional(
    Type.String({ description: "with `wrong_port`: the gateway's API address (PUBLIC_API_URL)" }),
  ),
});

export const EmptyObject = Type.Object({}, { additionalProperties: false });

export type ErrorBody = Type.Static<typeof ErrorBody>;
