import { createHash, randomBytes } from 'node:crypto';

export interface TicketGrant {
  userId: string;
  hostId: string;
}

interface Issued extends TicketGrant {
  expiresAt: number;
}

const digest = (secret: string) => createHash('sha256').update(secret, 'utf8').digest('base64url');

/**
 * One-time SSH tickets handed out by the bootstrap flow: each opens one SSH login to one host of one user,
 * once, within its lifetime. Only digests are kept, in memory: a restart voids tickets, which costs the user a
 * re-run of the bootstrap script and nothing else.
 */
export class AccessTickets {
  private readonly issued = new Map<string, Issued>();

  constructor(
    private readonly lifetimeMs = 2 * 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  issue(grant: TicketGrant): { ticket: string; expiresAt: Date } {
    this.prune();
    const ticket = `ccpt_${randomBytes(24).toString('base64url')}`;
    const expiresAt = this.now() + this.lifetimeMs;
    this.issued.set(digest(ticket), { ...grant, expiresAt });
    return { ticket, expiresAt: new Date(expiresAt) };
  }

  /** Whether `secret` looks like a ticket at all (so a password check can be skipped or used instead). */
  static looksLikeTicket(secret: string): boolean {
    return secret.startsWith('ccpt_');
  }

  /** Uses up the ticket: returns what it grants, or null when it is unknown, used or expired. */
  redeem(secret: string): TicketGrant | null {
    const key = digest(secret);
    const found = this.issued.get(key);
    if (!found) return null;
    this.issued.delete(key);
    if (found.expiresAt <= this.now()) return null;
    return { userId: found.userId, hostId: found.hostId };
  }

  private prune(): void {
    const now = this.now();
    for (const [key, entry] of this.issued) if (entry.expiresAt <= now) this.issued.delete(key);
  }
}
