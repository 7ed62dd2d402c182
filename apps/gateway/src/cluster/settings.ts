import Type, { type Static } from 'typebox';
import { hostPort, parseHostPort, positiveWhole } from '../shared/settings.js';

/** This gateway as one node of several on one PostgreSQL database (docs/configuration.md is written from these). */
export const ClusterVariables = Type.Object({
  NODE_NAME: Type.String({
    default: 'local',
    pattern: '^[a-z0-9][a-z0-9-]{0,62}$',
    typeText: 'a-z 0-9 and dashes, at most 63',
    description:
      "This gateway's name among those sharing the database; each gateway needs its own (see Nodes below)",
    problem: 'must be lowercase letters, digits and dashes, at most 63 (got "{got}")',
  }),
  NODE_MAX_HOSTS: positiveWhole(
    50,
    'Hosts placed on this node at most (automatic placement skips a full node)',
  ),
  NODE_HEARTBEAT_SECONDS: positiveWhole(
    10,
    'How often (seconds) this node writes its heartbeat and looks for silent nodes',
  ),
  NODE_DEAD_SECONDS: positiveWhole(
    45,
    'A node silent this long (seconds) is `unavailable` and its hosts `node_unavailable`; at least twice `NODE_HEARTBEAT_SECONDS`',
  ),
  INTERNAL_BIND: hostPort(
    "`host:port` where this node's internal channel listens for sessions other gateways relay to its hosts; needs PostgreSQL",
  ),
  INTERNAL_ADDRESS: Type.Optional(
    Type.String({
      defaultText: '`$INTERNAL_BIND`',
      typeText: 'host:port',
      description:
        '`host:port` the other gateways dial for that channel; needs `INTERNAL_BIND`, never a wildcard (`0.0.0.0`, `[::]`)',
    }),
  ),
});
export type ClusterVariables = Static<typeof ClusterVariables>;

/** This gateway as one node of several sharing a PostgreSQL database (docs/install.md, "Several machines"). */
export interface NodeSettings {
  /** NODE_NAME: unique among the gateways on one database; hosts keep the node they were placed on. */
  name: string;
  /** NODE_MAX_HOSTS: hosts placed on this node at most. */
  maxHosts: number;
  heartbeatSeconds: number;
  /** A node silent this long is `unavailable` and its hosts `node_unavailable` (NODE_DEAD_SECONDS). */
  deadSeconds: number;
  /** INTERNAL_BIND: where the internal channel listens for sessions other nodes relay here; null: off. */
  internalBind: { host: string; port: number } | null;
  /** INTERNAL_ADDRESS: host:port other nodes dial for that channel (default: INTERNAL_BIND). */
  internalAddress: string | null;
}

/** The node settings, and what is wrong between the variables (`onPostgres`: DATABASE_URL is PostgreSQL). */
export function nodeSettings(
  variables: ClusterVariables,
  onPostgres: boolean,
  problems: string[],
): NodeSettings {
  const { INTERNAL_BIND: bindText, INTERNAL_ADDRESS: addressText } = variables;
  const internalBind = parseHostPort(bindText);
  const internalAddress = addressText || (bindText ? bindText.trim() : null);
  if (addressText && !bindText)
    problems.push(
      'INTERNAL_ADDRESS needs INTERNAL_BIND: the address others dial must be one this node listens on',
    );
  if (internalAddress && /^(0\.0\.0\.0|\[?::\]?):/.test(internalAddress))
    problems.push(
      `INTERNAL_ADDRESS must be an address other nodes can dial (got "${internalAddress}"); set it beside INTERNAL_BIND=${internalAddress}`,
    );
  if (internalBind && !onPostgres)
    problems.push('INTERNAL_BIND needs DATABASE_URL on PostgreSQL: with SQLite there is only one node');
  const { NODE_HEARTBEAT_SECONDS: heartbeatSeconds, NODE_DEAD_SECONDS: deadSeconds } = variables;
  if (deadSeconds < heartbeatSeconds * 2)
    problems.push(
      `NODE_DEAD_SECONDS must be at least twice NODE_HEARTBEAT_SECONDS (${deadSeconds} < 2 × ${heartbeatSeconds})`,
    );
  return {
    name: variables.NODE_NAME,
    maxHosts: variables.NODE_MAX_HOSTS,
    heartbeatSeconds,
    deadSeconds,
    internalBind,
    internalAddress,
  };
}
