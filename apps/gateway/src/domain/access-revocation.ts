import { randomUUID } from 'node:crypto';
import type { HostRow } from '../store/hosts-repository.js';
import type { UserRow } from '../store/users-repository.js';
import { isExpired } from './auth-service.js';

const REASONS = ['disabled', 'expired', 'deleted', 'credentials_changed'] as const;
export type RevocationReason = (typeof REASONS)[number];

export type RevocationListener = (userId: string, reason: RevocationReason) => Promise<void> | void;

/** The database's change feed (store/change-feed.ts): how a revocation reaches the other gateways. */
export interface RevocationFeed {
  announce(topic: string, detail?: string): Promise<void>;
  subscribe(topic: string, onChange: (detail?: string) => void): void;
}

const TOPIC = 'revocations';

/**
 * Parts that hold live access for a user (SSE streams, SSH and VNC sessions) register here and are told when
 * that access must end, on every gateway sharing the database: a revocation is announced on the change feed and
 * replayed by the others. Effects on shared state (stopping the user's hosts) register `whereChanged` and run
 * once, on the gateway that made the change.
 */
export class AccessRevocation {
  private readonly listeners: RevocationListener[] = [];
  private readonly onceListeners: RevocationListener[] = [];
  private readonly origin = randomUUID();

  constructor(
    private readonly feed: RevocationFeed | null = null,
    private readonly onError: (error: unknown) => void = () => {},
  ) {
    feed?.subscribe(TOPIC, (detail) => this.heard(detail));
  }

  /** Ends live access held in this process; runs on every gateway. */
  register(listener: RevocationListener): void {
    this.listeners.push(listener);
  }

  /** Changes shared state; runs only on the gateway where the change was made. */
  registerWhereChanged(listener: RevocationListener): void {
    this.onceListeners.push(listener);
  }

  async revoke(userId: string, reason: RevocationReason): Promise<void> {
    for (const listener of this.listeners) await listener(userId, reason);
    await this.feed?.announce(TOPIC, `${this.origin} ${userId} ${reason}`).catch(this.onError);
    for (const listener of this.onceListeners) await listener(userId, reason);
  }

  /** Another gateway's revocation (PostgreSQL also echoes this gateway's own, which is skipped). A notice
   * without details (the feed dropped or came back) is left to the sessions' periodic re-checks. */
  private heard(detail: string | undefined): void {
    const [origin, userId, reason] = detail?.split(' ') ?? [];
    if (!origin || origin === this.origin || !userId) return;
    if (!REASONS.includes(reason as RevocationReason)) return;
    void (async () => {
      for (const listener of this.listeners) await listener(userId, reason as RevocationReason);
    })().catch(this.onError);
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
