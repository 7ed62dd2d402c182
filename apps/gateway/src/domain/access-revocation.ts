import { randomUUID } from 'node:crypto';
import type { EventBus } from '../events/event-bus.js';
import type { RevocationReason } from '../events/internal-events.js';
import type { HostRow } from '../store/hosts-repository.js';
import type { UserRow } from '../store/users-repository.js';
import { isExpired } from './account-expiry.js';

const REASONS: readonly RevocationReason[] = ['disabled', 'expired', 'deleted', 'credentials_changed'];

/** The database's change feed (store/change-feed.ts): how a revocation reaches the other gateways. */
export interface RevocationFeed {
  announce(topic: string, detail?: string): Promise<void>;
  subscribe(topic: string, onChange: (detail?: string) => void): void;
}

const TOPIC = 'revocations';

/**
 * Relays revocations between the gateways sharing the database. Parts that hold live access for a user (SSE
 * streams, SSH and VNC sessions) react to `user.access_ended`, emitted on every gateway: a revocation is announced
 * on the change feed and replayed by the others. Effects on shared state (stopping the user's hosts) react to
 * `user.access_revoked`, emitted only on the gateway that made the change.
 */
export class AccessRevocation {
  private readonly origin = randomUUID();

  constructor(
    private readonly bus: EventBus,
    private readonly feed: RevocationFeed | null = null,
    private readonly onError: (error: unknown) => void = () => {},
  ) {
    feed?.subscribe(TOPIC, (detail) => this.heard(detail));
  }

  async revoke(userId: string, reason: RevocationReason): Promise<void> {
    await this.bus.emit({ type: 'user.access_ended', userId, reason });
    await this.feed?.announce(TOPIC, `${this.origin} ${userId} ${reason}`).catch(this.onError);
    await this.bus.emit({ type: 'user.access_revoked', userId, reason });
  }

  /** Another gateway's revocation (PostgreSQL also echoes this gateway's own, which is skipped). A notice
   * without details (the feed dropped or came back) is left to the sessions' periodic re-checks. */
  private heard(detail: string | undefined): void {
    const [origin, userId, reason] = detail?.split(' ') ?? [];
    if (!origin || origin === this.origin || !userId) return;
    if (!REASONS.includes(reason as RevocationReason)) return;
    this.bus
      .emit({ type: 'user.access_ended', userId, reason: reason as RevocationReason })
      .catch(this.onError);
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
