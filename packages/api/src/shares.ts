import Type from 'typebox';
import { Timestamp } from './common.js';

export const ListeningPort = Type.Object({
  port: Type.Integer({ minimum: 1024, maximum: 65535 }),
  loopback_only: Type.Boolean({
    description: 'It listens on loopback only: a share still reaches it (the gateway dials it from inside)',
  }),
});

export const ListeningPortList = Type.Object({
  items: Type.Array(ListeningPort, {
    description:
      "TCP ports the workspace listens on that may be shared (1024–65535, not the desktop's own), read from /proc/net/tcp",
  }),
});

export const PortShare = Type.Object({
  id: Type.String({ format: 'uuid' }),
  host_id: Type.String({ format: 'uuid' }),
  port: Type.Integer({ description: 'The port in the workspace' }),
  label: Type.String({ description: 'Its host name label under SHARE_DOMAIN, and its cookie name' }),
  origin: Type.String({
    description: "Where it is served: an origin of its own, never the dashboard's (its entry is below it)",
  }),
  usernames: Type.Array(Type.String(), {
    description: 'Signed-in users it is shared with, besides the owner and admins',
  }),
  link_expires_at: Type.Union([Timestamp, Type.Null()], {
    description: 'When its link stops opening it; null without a link',
  }),
  created_at: Timestamp,
});

export const PortShareList = Type.Object({ items: Type.Array(PortShare) });

export const PortShareCreate = Type.Object(
  {
    port: Type.Integer({ minimum: 1024, maximum: 65535, description: 'A port the workspace listens on' }),
    usernames: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
        maxItems: 50,
        description: 'Signed-in users who may open it too (private to the owner and admins by default)',
      }),
    ),
    link_expires_in_seconds: Type.Optional(
      Type.Integer({
        minimum: 60,
        description:
          'Make a signed link that opens it for anyone holding it, for this long (at most SHARE_LINK_MAX_HOURS)',
      }),
    ),
  },
  { additionalProperties: false },
);

export const PortShareCreated = Type.Object({
  ...PortShare.properties,
  link_url: Type.Union([Type.String(), Type.Null()], {
    description: 'The signed link, shown this once (only its digest is kept); null without a link',
  }),
});

export const PortShareTicket = Type.Object({
  url: Type.String({
    description:
      "The share's entry with a one-time ticket, for a browser to open within 60 seconds: it sets a cookie for this share alone (HttpOnly, on the share's origin) and redirects to the app",
  }),
  expires_at: Timestamp,
});

export const ReceivedPortShare = Type.Object({
  id: Type.String({ format: 'uuid', description: 'The share, for a ticket into it' }),
  host_short_id: Type.String({ description: 'The short id of the host whose port it is' }),
  owner_username: Type.String({ description: 'The user who owns the host' }),
  port: Type.Integer({ description: 'The port in the workspace' }),
  origin: Type.String({
    description: 'Where it is served (opened through a ticket, never with the API token)',
  }),
  created_at: Timestamp,
});

export const ReceivedPortShareList = Type.Object({
  items: Type.Array(ReceivedPortShare, {
    description:
      "Shares other users shared with the caller by username, of active owners' existing hosts; a revoked share is gone",
  }),
});

export type ListeningPort = Type.Static<typeof ListeningPort>;
export type ListeningPortList = Type.Static<typeof ListeningPortList>;
export type PortShare = Type.Static<typeof PortShare>;
export type PortShareList = Type.Static<typeof PortShareList>;
export type PortShareCreate = Type.Static<typeof PortShareCreate>;
export type PortShareCreated = Type.Static<typeof PortShareCreated>;
export type PortShareTicket = Type.Static<typeof PortShareTicket>;
export type ReceivedPortShare = Type.Static<typeof ReceivedPortShare>;
export type ReceivedPortShareList = Type.Static<typeof ReceivedPortShareList>;
