import Type, { type Static } from 'typebox';
import { RELAY_CONNECTIONS_PER_PORT } from '../runtime/egress-gateway-files.js';
import { port, positiveWhole } from '../shared/settings.js';

/** The SSH proxy and the CLI's folder mounts through it (docs/configuration.md is written from these). */
export const SshVariables = Type.Object({
  SSH_PROXY_HOST: Type.Optional(
    Type.String({
      defaultText: '`$HTTP_HOST`',
      description:
        'Address of the SSH proxy (users reach it directly; set `0.0.0.0` when `HTTP_HOST` is the loopback behind a reverse proxy)',
    }),
  ),
  SSH_PROXY_PORT: port(2222, 'Port of the SSH proxy (`0` picks a free port)', true),
  SSH_MAX_UNAUTHENTICATED_PER_ADDRESS: positiveWhole(
    64,
    'SSH connections one client address may have open before they log in; past it new ones are closed at once',
  ),
  SSH_MAX_SESSIONS_PER_USER: positiveWhole(
    100,
    'Live SSH sessions one user may have through the proxy; past it a login is refused, saying to close one',
  ),
  // Each session is a connection through the host's relay, which takes RELAY_CONNECTIONS_PER_PORT at once; past
  // that one would hang in its backlog until the login timed out, so the proxy refuses it first, with a message.
  SSH_MAX_SESSIONS_PER_HOST: Type.Integer({
    minimum: 1,
    maximum: RELAY_CONNECTIONS_PER_PORT,
    default: 100,
    description: `SSH sessions one host may have through the proxy (open or opening), at most ${RELAY_CONNECTIONS_PER_PORT}, what its relay takes; past it a login is refused at once`,
    problem: `may be at most ${RELAY_CONNECTIONS_PER_PORT}, the connections the relay in each host's egress gateway takes at once, and at least 1 (got "{got}")`,
  }),
  TERMINALS_PER_USER: positiveWhole(
    10,
    'Browser terminals one user may have open on one gateway; past it the ticket is refused (409 `too_many_terminals`), saying to close one',
  ),
  MOUNTS_DIR: Type.String({
    default: '/run/cloud-cli-proxy/mounts',
    description:
      "Where the gateway mounts users' folders (the CLI's reverse sshfs); on a shared mount, traversable by `MOUNT_USER`",
  }),
  MOUNT_USER: Type.String({
    default: 'ccp-mount',
    pattern: '^[a-z_][a-z0-9_-]{0,31}$',
    typeText: 'Linux user name',
    description:
      'The system user `sshfs` runs as for folder mounts (never root); `scripts/folder-mounts.sh` creates it',
    problem: 'must be a Linux user name (got "{got}")',
  }),
});
export type SshVariables = Static<typeof SshVariables>;
