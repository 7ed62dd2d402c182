import Type from 'typebox';
import { Node } from './nodes.js';

export const Health = Type.Object({
  status: Type.Union([Type.Literal('ok'), Type.Literal('degraded')]),
  checks: Type.Object({
    database: Type.String({ description: '`ok`, or the error text' }),
    agent: Type.String({ description: 'The container engine: `ok`, or the error text' }),
  }),
});

export const DashboardStats = Type.Object({
  users: Type.Object({
    total: Type.Integer(),
    active: Type.Integer(),
    disabled: Type.Integer(),
    expired: Type.Integer(),
  }),
  hosts: Type.Object({
    total: Type.Integer(),
    running: Type.Integer(),
    stopped: Type.Integer(),
    failed: Type.Integer(),
  }),
  egress_ips: Type.Object({ total: Type.Integer(), bound: Type.Integer(), failing: Type.Integer() }),
  tasks: Type.Object({ pending: Type.Integer(), running: Type.Integer(), failed_24h: Type.Integer() }),
  sessions: Type.Object({ ssh: Type.Integer(), vnc: Type.Integer() }),
  nodes: Type.Array(Node, { description: 'The gateways sharing the database, one per engine' }),
});

export type Health = Type.Static<typeof Health>;
export type DashboardStats = Type.Static<typeof DashboardStats>;
