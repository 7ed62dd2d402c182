import Type from 'typebox';
import { Timestamp, Uuid } from './common.js';

const Bytes = Type.Integer({ minimum: 0, description: 'bytes' });

const Moved = {
  sent_bytes: Type.Integer({
    minimum: 0,
    description: 'Bytes the workspace sent through its upstream (payload, before the upstream protocol)',
  }),
  received_bytes: Bytes,
};

/** Which hours a traffic read covers, `[from, to)`; both default (this month so far). */
export const EgressTrafficQuery = Type.Object(
  {
    from: Type.Optional(
      Type.String({
        format: 'date-time',
        description: 'Start (RFC 3339); default: the start of this month (UTC)',
      }),
    ),
    to: Type.Optional(
      Type.String({ format: 'date-time', description: 'End, exclusive (RFC 3339); default: now' }),
    ),
    host_id: Type.Optional(Uuid),
  },
  { additionalProperties: false },
);

export const EgressTrafficTotals = Type.Object({
  from: Timestamp,
  to: Timestamp,
  hosts: Type.Array(Type.Object({ host_id: Uuid, ...Moved })),
  egress_ips: Type.Array(Type.Object({ egress_ip_id: Uuid, ...Moved })),
  users: Type.Array(Type.Object({ user_id: Uuid, ...Moved })),
});

export const EgressTrafficHours = Type.Object({
  from: Timestamp,
  to: Timestamp,
  hours: Type.Array(
    Type.Object({
      hour: Timestamp,
      host_id: Uuid,
      egress_ip_id: Uuid,
      user_id: Uuid,
      ...Moved,
    }),
  ),
});

export type EgressTrafficQuery = Type.Static<typeof EgressTrafficQuery>;
export type EgressTrafficTotals = Type.Static<typeof EgressTrafficTotals>;
export type EgressTrafficHours = Type.Static<typeof EgressTrafficHours>;
