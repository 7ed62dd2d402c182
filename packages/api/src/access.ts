import Type from 'typebox';
import { ShortId, Timestamp, Uuid } from './common.js';
import { HostStatus, TaskStatus } from './hosts.js';

const Secret = Type.String({ minLength: 1, maxLength: 1024 });

export const EntryAuthRequest = Type.Object(
  {
    password: Secret,
    task_id: Type.Optional(
      Type.Union([Uuid, Type.Null()], {
        description: 'the start task a previous 202 named: if it failed, the answer is 409 `task_failed`',
      }),
    ),
  },
  { additionalProperties: false },
);

export const EntryReady = Type.Object({
  status: Type.Literal('ready'),
  ssh_user: Type.String({ description: '`<username>+<short_id>`' }),
  ssh_pass: Type.String({ description: "the owner's SSH password" }),
  ssh_host: Type.String(),
  ssh_port: Type.Integer(),
});

export const EntryStarting = Type.Object({
  status: Type.Literal('starting'),
  task_id: Uuid,
  stage: Type.String({ description: "the start task's current stage, for the caller's status line" }),
  progress: Type.Integer({ minimum: 0, maximum: 100 }),
});

export const EntryCheckRequest = Type.Object({ password: Secret }, { additionalProperties: false });

export const EntryCheck = Type.Object({
  short_id: ShortId,
  username: Type.String({ description: "the host owner's username" }),
  host_status: HostStatus,
});

export const BootstrapSessionRequest = Type.Object(
  {
    username: Type.String({ minLength: 1, maxLength: 200 }),
    password: Secret,
    host: Type.Optional(
      Type.Union([ShortId, Type.Null()], { description: 'needed when the user has several hosts' }),
    ),
  },
  { additionalProperties: false },
);

export const BootstrapSessionAccepted = Type.Object({
  task_id: Uuid,
  status_url: Type.String(),
  handoff_secret: Type.String({
    description:
      'sent back as the `X-Bootstrap-Secret` header of the handoff: the one-time SSH ticket goes only to the client that began the session (administrators see task IDs)',
  }),
});

/** The header that carries a bootstrap session's `handoff_secret` back on its handoff. */
export const BOOTSTRAP_SECRET_HEADER = 'x-bootstrap-secret';

export const BootstrapHandoffHeaders = Type.Object({
  [BOOTSTRAP_SECRET_HEADER]: Type.Optional(Type.String({ maxLength: 200 })),
});

export const BootstrapTask = Type.Object({
  task_id: Uuid,
  status: TaskStatus,
  stage: Type.String(),
  message: Type.String(),
  progress: Type.Integer({ minimum: 0, maximum: 100 }),
  error: Type.Union([Type.Object({ code: Type.String(), message: Type.String() }), Type.Null()]),
});

export const BootstrapHandoff = Type.Object({
  host: Type.String({ description: 'SSH proxy host name' }),
  port: Type.Integer(),
  user: Type.String({ description: '`<username>+<short_id>`' }),
  password: Type.String({ description: 'one-time SSH ticket for `user`, valid once until `expires_at`' }),
  expires_at: Timestamp,
});

export const ShortIdParams = Type.Object({ shortId: Type.String({ maxLength: 64 }) });
export const TaskIdParams = Type.Object({ taskID: Type.String({ format: 'uuid' }) });

export type EntryAuthRequest = Type.Static<typeof EntryAuthRequest>;
export type EntryReady = Type.Static<typeof EntryReady>;
export type EntryStarting = Type.Static<typeof EntryStarting>;
export type EntryCheckRequest = Type.Static<typeof EntryCheckRequest>;
export type EntryCheck = Type.Static<typeof EntryCheck>;
export type BootstrapSessionRequest = Type.Static<typeof BootstrapSessionRequest>;
export type BootstrapSessionAccepted = Type.Static<typeof BootstrapSessionAccepted>;
export type BootstrapTask = Type.Static<typeof BootstrapTask>;
export type BootstrapHandoff = Type.Static<typeof BootstrapHandoff>;
