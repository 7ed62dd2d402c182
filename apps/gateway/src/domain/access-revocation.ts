import type { HostRow } from '../store/hosts-repository.js';
import type { UserRow } from '../store/users-repository.js';
import { isExpired } from './auth-service.js';

export type RevocationReason = 'disabled' | 'expired' | 'deleted' | 'credentials_changed';

export type RevocationListener = (userId: string, reason: RevocationReason) => Promise<void> | void;

/** Parts that hold live access for a user (SSE streams, SSH and VNC sessions, running hosts) register here,
 * and are told when that access must end. */
export class AccessRevocation {
  private readonly listeners: RevocationListener[] = [];

  register(listener: RevocationListener): void {
    this.listeners.push(listener);
  }

  async revoke(userId: string, reason: RevocationReason): Promise<void> {
    for (const listener of this.listeners) await listener(userId, reason);
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
