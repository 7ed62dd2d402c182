import type { Actor } from '@ccp/api';
import type { HostWithOwner } from '../../store/hosts-repository.js';
import { errors } from '../errors.js';

/** A start with no egress IP bound, said to whoever can act on it: only an administrator can bind one. */
export function noEgressBound(actor: Actor) {
  return errors.conflict(
    'no_egress_bound',
    actor.kind === 'admin' || actor.kind === 'system'
      ? 'The host has no egress IP bound; bind one first (POST /v1/admin/bindings)'
      : 'The host has no egress IP, so it cannot start; ask your administrator to bind one',
  );
}

/** Nothing can be done to a host whose node is gone but wait for it. */
export function nodeUnavailable(host: HostWithOwner) {
  return errors.conflict(
    'node_unavailable',
    `The host's node ${host.node} is not heartbeating; its workspace is out of reach until the node returns`,
  );
}
