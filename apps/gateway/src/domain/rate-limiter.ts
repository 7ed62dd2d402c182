import { errors } from './errors.js';

export interface RateLimiterOptions {
  maxFailures?: number;
  windowMs?: number;
  now?: () => number;
}

/** Counts failed secrets per key (a username, a client address) over a sliding window.
 * Shared by login, bootstrap, entry auth and the SSH proxy: a failure on any of them counts for all. */
export class FailureRateLimiter {
  private readonly failures = new Map<string, number[]>();
  private readonly maxFailures: number;
  private readonly windowMs: number;
  private readonly now: () => number;

  constructor(options: RateLimiterOptions = {}) {
    this.maxFailures = options.maxFailures ?? 10;
    this.windowMs = options.windowMs ?? 5 * 60_000;
    this.now = options.now ?? Date.now;
  }

  static keysFor(username: string, clientAddress: string): string[] {
    return [`user:${username.toLowerCase()}`, ...FailureRateLimiter.addressKeys(clientAddress)];
  }

  /** For failures with no username to blame (e.g. guessed short IDs). */
  static addressKeys(clientAddress: string): string[] {
    return [`addr:${clientAddress}`];
  }

  /** Throws 429 with the seconds until the oldest counted failure leaves the window. */
  assertAllowed(keys: string[]): void {
    const now = this.now();
    let retryAfterMs = 0;
    for (const key of keys) {
      const recent = this.recent(key, now);
      if (recent.length >= this.maxFailures) {
        retryAfterMs = Math.max(
          retryAfterMs,
          recent[recent.length - this.maxFailures]! + this.windowMs - now,
        );
      }
    }
    if (retryAfterMs > 0) throw errors.rateLimited(Math.max(1, Math.ceil(retryAfterMs / 1000)));
  }

  recordFailure(keys: string[]): void {
    const now = this.now();
    for (const key of keys) {
      const recent = this.recent(key, now);
      recent.push(now);
      this.failures.set(key, recent);
    }
    if (this.failures.size > 100_000) this.prune(now);
  }

  /** A correct secret clears the failures counted against that username (not against the address). */
  recordSuccess(username: string): void {
    this.failures.delete(`user:${username.toLowerCase()}`);
  }

  private recent(key: string, now: number): number[] {
    return (this.failures.get(key) ?? []).filter((t) => t > now - this.windowMs);
  }

  private prune(now: number): void {
    for (const [key, times] of this.failures) {
      if (!times.some((t) => t > now - this.windowMs)) this.failures.delete(key);
    }
  }
}
