import type { StopReason } from '@ccp/api';
import type { HostWithOwner } from '../../store/hosts-repository.js';
import { type HostAction, type HostGrant, hostOf } from './grants.js';

/**
 * A host as the SSH proxy and the desktop reach it: what they name, check and dial, and nothing of the store's
 * row (no sealed secrets, no columns they would come to depend on).
 */
export interface HostAccess {
  id: string;
  shortId: string;
  /** The owner's account: their sessions end when it loses access. */
  ownerId: string;
  /** The owner's username: the workspace's Linux user is named after it (linuxUserFor). */
  ownerUsername: string;
  /** The host's state (`running`, `stopped`, `node_unavailable`, …); only a running host is reached. */
  status: string;
  /** The node holding its containers; null only for a host made before nodes (this gateway's). */
  node: string | null;
  /** Why the lifecycle policy stopped it last (idle, lifetime, schedule); null when it did not. */
  policyStopReason: StopReason | null;
}

export const hostAccessOf = (host: HostWithOwner): HostAccess => ({
  id: host.id,
  shortId: host.short_id,
  ownerId: host.user_id,
  ownerUsername: host.username,
  status: host.status,
  node: host.node,
  policyStopReason: (host.policy_stop_reason as StopReason | null) ?? null,
});

/** The host of a grant covering `action`, as the SSH proxy and the desktop see it (`hostOf`'s checks). */
export const grantedHostAccess = (grant: HostGrant, action: HostAction): HostAccess =>
  hostAccessOf(hostOf(grant, action));
