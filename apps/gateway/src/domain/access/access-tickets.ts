import { createHash, randomBytes } from 'node:crypto';
import type { AccessTicketsRepository } from '../../store/access-tickets-repository.js';

export interface TicketGrant {
  userId: string;
  hostId: string;
}

const digest = (secret: string) => createHash('sha256').update(secret, 'utf8').digest('base64url');

/**
 * One-time tickets: each opens one thing (an SSH login from the bootstrap flow, a host's desktop, a
 * browser terminal) to one host of
 * one user, once, within its lifetime. Each kind has its own instance, so a ticket of one kind never opens
 * another. Only digests are kept, in the database: a ticket issued by one gateway is taken at any other sharing
 * it, and only once.
 */
export class AccessTickets<G extends TicketGrant = TicketGrant> {
  constructor(
    private readonly store: AccessTicketsRepository,
    private readonly kind: 'ssh' | 'desktop' | 'terminal' | 'share',
    private readonly lifetimeMs = 2 * 60_000,
    private readonly now: () => number = () => Date.now(),
  ) {}

  async issue(grant: G): Promise<{ ticket: string; expiresAt: Date }> {
    await this.store.deleteExpired(new Date(this.now()).toISOString());
    const ticket = `ccpt_${randomBytes(24).toString('base64url')}`;
    const expiresAt = new Date(this.now() + this.lifetimeMs);
    await this.store.insert({
      digest: digest(ticket),
      kind: this.kind,
      granted: JSON.stringify(grant),
      expires_at: expiresAt.toISOString(),
    });
    return { ticket, expiresAt };
  }

  /** Whether `secret` looks like a ticket at all (so a password check can be skipped or used instead). */
  static looksLikeTicket(secret: string): boolean {
    return secret.startsWith('ccpt_');
  }

  /** Uses up the ticket: returns what it grants, or null when it is unknown, used, expired or of another kind. */
  async redeem(secret: string): Promise<G | null> {
    const found = await this.store.take(digest(secret), this.kind);
    if (!found) return null;
    return Date.parse(found.expires_at) > this.now() ? (JSON.parse(found.granted) as G) : null;
  }
}
