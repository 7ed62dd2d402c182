import Type from 'typebox';
import { Timestamp } from './common.js';

export const NodeName = Type.String({
  pattern: '^[a-z0-9][a-z0-9-]{0,62}$',
  description: 'A gateway node: lowercase letters, digits and dashes, at most 63 characters',
});

export const NodeState = Type.Union([Type.Literal('up'), Type.Literal('unavailable')], {
  description: '`unavailable`: no heartbeat within NODE_DEAD_SECONDS; its hosts show `node_unavailable`',
});

export const Node = Type.Object({
  name: NodeName,
  state: NodeState,
  internal_address: Type.Union([Type.String(), Type.Null()], {
    description: 'host:port of its internal channel; null when it takes no sessions relayed by other nodes',
  }),
  memory_mb: Type.Integer({ description: 'Memory of the machine' }),
  cpus: Type.Integer(),
  max_hosts: Type.Integer({ description: 'Hosts placed on it at most (NODE_MAX_HOSTS)' }),
  hosts: Type.Integer({ description: 'Hosts placed on it' }),
  running: Type.Integer({ description: 'Of those, running' }),
  images_ready: Type.Boolean({ description: 'Both images are built on its engine: new hosts may go there' }),
  started_at: Timestamp,
  heartbeat_at: Timestamp,
});

export const NodeList = Type.Object({ nodes: Type.Array(Node) });

export type Node = Type.Static<typeof Node>;
export type NodeList = Type.Static<typeof NodeList>;
