import { createHash, randomBytes } from 'node:crypto';

export interface TicketGrant {
  userId: string;
  hostId: string;
}

const digest = (secret: string) => createHash('sha256').update(secret, 'utf8').digest('base64url');

/**
 * One-time tickets: each opens one thing (an SSH login from the bootstrap flow, a host's desktop) to one host of
 * one user, once, within its lifetime. Each kind has its own instance, so a ticket of one kind never opens
 * another. Only digests are kept, in memory: a restart voids tickets, which costs the user a re-run of the
 * bootstrap script or another click on "Open desktop", and nothing else.
 */
export class AccessTickets<G extends TicketGrant = TicketGrant> {
  private readonly issued = new Map<string, { grant: G; expiresAt: number }>();

  constructor(
    private readonly lifetimeMs = 2 * 60_000,
    private readonly now: () => number = () => Date.now(),
  ) {}

  issue(grant: G): { ticket: string; expiresAt: Date } {
    this.prune();
    const ticket = `ccpt_${randomBytes(24).toString('base64url')}`;
    const expiresAt = this.now() + this.lifetimeMs;
    this.issued.set(digest(ticket), { grant, expiresAt });
    return { ticket, expiresAt: new Date(expiresAt) };
  }

  /** Whether `secret` looks like a ticket at all (so a password check can be skipped or used instead). */
  static looksLikeTicket(secret: string): boolean {
    return secret.startsWith('ccpt_');
  }

  /** Uses up the ticket: returns what it grants, or null when it is unknown, used or expired. */
  redeem(secret: string): G | null {
    const key = digest(secret);
    const found = this.issued.get(key);
    if (!found) return null;
    this.issued.delete(key);
    return found.expiresAt > this.now() ? found.grant : null;
  }

  private prune(): void {
    const now = this.now();
    for (const [key, entry] of this.issued) if (entry.expiresAt <= now) this.issued.delete(key);
  }
}
