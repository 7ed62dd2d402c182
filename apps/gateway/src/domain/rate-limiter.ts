import { errors } from './errors.js';

export interface RateLimiterOptions {
  /** Failures per (username, address) pair and per address before that caller is refused. */
  maxFailures?: number;
  windowMs?: number;
  /** Failures per username, from any address, before that username's password checks slow down. */
  accountCeiling?: number;
  /** Added wait per failure past the ceiling, up to `maxDelayMs`. */
  delayStepMs?: number;
  maxDelayMs?: number;
  now?: () => number;
}

/**
 * Counts failed secrets over a sliding window. Shared by login, bootstrap, entry auth and the SSH proxy's
 * password logins: a failure on any of them counts for all.
 *
 * Callers are refused per (username, address) pair and per address, so an attacker locks out only their own
 * address. Per username, failures from every address only slow that username's password checks down: usernames
 * are public, and a count that refused the account would hand anyone a lockout of any account.
 */
export class FailureRateLimiter {
  private readonly failures = new Map<string, number[]>();
  private readonly maxFailures: number;
  private readonly windowMs: number;
  private readonly accountCeiling: number;
  private readonly delayStepMs: number;
  private readonly maxDelayMs: number;
  private readonly now: () => number;

  constructor(options: RateLimiterOptions = {}) {
    this.maxFailures = options.maxFailures ?? 10;
    this.windowMs = options.windowMs ?? 5 * 60_000;
    this.accountCeiling = options.accountCeiling ?? 50;
    this.delayStepMs = options.delayStepMs ?? 100;
    this.maxDelayMs = options.maxDelayMs ?? 5_000;
    this.now = options.now ?? Date.now;
  }

  /** The keys that refuse a caller: its (username, address) pair and its address. */
  static keysFor(username: string, clientAddress: string): string[] {
    return [
      FailureRateLimiter.pairKey(username, clientAddress),
      ...FailureRateLimiter.addressKeys(clientAddress),
    ];
  }

  /** For failures with no username to blame (e.g. guessed short IDs). */
  static addressKeys(clientAddress: string): string[] {
    return [`addr:${clientAddress}`];
  }

  private static pairKey(username: string, clientAddress: string): string {
    return `pair:${username.toLowerCase()}@${clientAddress}`;
  }

  private static accountKey(username: string): string {
    return `user:${username.toLowerCase()}`;
  }

  /** Seconds until the oldest counted failure of a key over the limit leaves the window; 0 when allowed. */
  retryAfterSeconds(keys: string[]): number {
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
    return retryAfterMs > 0 ? Math.max(1, Math.ceil(retryAfterMs / 1000)) : 0;
  }

  /** Throws 429 with `retryAfterSeconds`. */
  assertAllowed(keys: string[]): void {
    const retryAfter = this.retryAfterSeconds(keys);
    if (retryAfter > 0) throw errors.rateLimited(retryAfter);
  }

  /** How long a password check for `username` waits first: 0 until the per-username ceiling is passed. */
  delayFor(username: string): number {
    const over =
      this.recent(FailureRateLimiter.accountKey(username), this.now()).length - this.accountCeiling;
    return over < 0 ? 0 : Math.min(this.maxDelayMs, (over + 1) * this.delayStepMs);
  }

  /** Counts a failure against `keys` and, when there is one, against the username's slow-down count. */
  recordFailure(keys: string[], username?: string): void {
    const now = this.now();
    const all = username === undefined ? keys : [...keys, FailureRateLimiter.accountKey(username)];
    for (const key of all) {
      const recent = this.recent(key, now);
      recent.push(now);
      this.failures.set(key, recent);
    }
    if (this.failures.size > 100_000) this.prune(now);
  }

  /** A correct secret clears the failures of that (username, address) pair; the address keeps its count. */
  recordSuccess(username: string, clientAddress: string): void {
    this.failures.delete(FailureRateLimiter.pairKey(username, clientAddress));
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
