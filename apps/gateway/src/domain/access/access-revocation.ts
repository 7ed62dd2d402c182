import type { EventBus } from '../../events/event-bus.js';
import type { ClusterBus, RevocationReason } from '../../shared/cluster-messages.js';
import type { HostRow } from '../../store/hosts-repository.js';
import type { UserRow } from '../../store/users-repository.js';
import { isExpired } from './account-expiry.js';

/**
 * Relays revocations between the gateways sharing the database. Parts that hold live access for a user (SSE
 * streams, SSH and VNC sessions) react to `user.access_ended`, emitted on every gateway: a revocation is published
 * as `access.revoked` on the cluster bus and replayed by the others. Effects on shared state (stopping the user's
 * hosts) react to `user.access_revoked`, emitted only on the gateway that made the change. Revocations missed while
 * the bus was down are left to the sessions' periodic re-checks.
 */
export class AccessRevocation {
  constructor(
    private readonly bus: EventBus,
    private readonly cluster: ClusterBus | null = null,
    private readonly onError: (error: unknown) => void = () => {},
  ) {
    cluster?.subscribe('access.revoked', ({ userId, reason }) => {
      this.bus.emit({ type: 'user.access_ended', userId, reason }).catch(this.onError);
    });
  }

  async revoke(userId: string, reason: RevocationReason): Promise<void> {
    await this.bus.emit({ type: 'user.access_ended', userId, reason });
    await this.cluster?.publish('access.revoked', { userId, reason }).catch(this.onError);
    await this.bus.emit({ type: 'user.access_revoked', userId, reason });
  }
}

/**
 * Why a live session (SSH, desktop) must end now, or null: its user is gone, disabled or expired, or its host
 * is no longer running. For state changes no revocation announced (another gateway, a crash).
 */
export function sessionEndReason(
  user: Pick<UserRow, 'status' | 'expires_at'> | undefined,
  host: Pick<HostRow, 'status'> | undefined,
  now = new Date().toISOString(),
): 'user_revoked' | 'host_stopped' | null {
  if (!user || user.status === 'disabled' || isExpired(user, now)) return 'user_revoked';
  return host?.status === 'running' ? null : 'host_stopped';
}
