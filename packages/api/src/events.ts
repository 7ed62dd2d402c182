import Type from 'typebox';
import { Timestamp, Uuid } from './common.js';

export const ActorKind = Type.Union([
  Type.Literal('admin'),
  Type.Literal('user'),
  Type.Literal('system'),
  Type.Literal('anonymous'),
]);

export const Actor = Type.Object({
  kind: ActorKind,
  id: Type.Union([Uuid, Type.Null()]),
  username: Type.Union([Type.String(), Type.Null()]),
});

export const EventLevel = Type.Union([Type.Literal('info'), Type.Literal('warn'), Type.Literal('error')]);

export const EventRecord = Type.Object({
  id: Uuid,
  type: Type.String({ description: 'Dotted name such as user.created or auth.login.failed' }),
  level: EventLevel,
  message: Type.String(),
  actor: Actor,
  user_id: Type.Union([Uuid, Type.Null()]),
  host_id: Type.Union([Uuid, Type.Null()]),
  task_id: Type.Union([Uuid, Type.Null()]),
  data: Type.Record(Type.String(), Type.Unknown()),
  created_at: Timestamp,
});

export const EventQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 50 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, default: 0 })),
  user_id: Type.Optional(Uuid),
  host_id: Type.Optional(Uuid),
  type: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
  since: Type.Optional(Timestamp),
  until: Type.Optional(Timestamp),
});

export const EventList = Type.Object({
  events: Type.Array(EventRecord),
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
});

export const ADMIN_TOPICS = ['hosts', 'tasks', 'image-status', 'egress-ips', 'nodes'] as const;
export const USER_TOPICS = ['hosts', 'tasks'] as const;

export const SseTopic = Type.Union([
  Type.Literal('hosts'),
  Type.Literal('tasks'),
  Type.Literal('image-status'),
  Type.Literal('egress-ips'),
  Type.Literal('nodes'),
]);
export const SseAction = Type.Union([Type.Literal('create'), Type.Literal('update'), Type.Literal('delete')]);

/** The JSON object carried in each SSE `data:` line. */
export const SseMessage = Type.Object({
  topic: SseTopic,
  action: SseAction,
  id: Type.Optional(Type.String()),
  payload: Type.Optional(Type.Unknown()),
});

/** `GET /v1/{admin,user}/sse`: the stream itself, as the API document describes it. */
export const SseStream = Type.String({
  description:
    'text/event-stream: `event: message` frames whose `data` is an SseMessage {topic, action, id?, payload?} ' +
    'and whose `id` a client sends back as Last-Event-ID to resume',
});

export const SseQuery = Type.Object({
  topics: Type.Optional(
    Type.String({ description: 'Comma-separated topics; all readable topics when absent' }),
  ),
  token: Type.Optional(Type.String({ description: 'Bearer token for clients that cannot set headers' })),
});

export type Actor = Type.Static<typeof Actor>;
export type EventLevel = Type.Static<typeof EventLevel>;
export type EventRecord = Type.Static<typeof EventRecord>;
export type EventQuery = Type.Static<typeof EventQuery>;
export type SseTopic = Type.Static<typeof SseTopic>;
export type SseAction = Type.Static<typeof SseAction>;
export type SseMessage = Type.Static<typeof SseMessage>;
