import { isIP } from 'node:net';
import { errors } from '../errors.js';

/**
 * Where failures are counted. The gateway's is its database, so every gateway sharing it counts the same
 * failures: a caller gains no attempts by spreading them over several gateways.
 */
export interface FailureLog {
  add(keys: readonly string[], at: number): Promise<void>;
  /** The times of a key's failures after `after`, oldest first. */
  timesAfter(key: string, after: number): Promise<number[]>;
  clear(key: string): Promise<void>;
  /** Forgets failures at or before `before`. */
  prune(before: number): Promise<void>;
}

/** A failure log of this process alone (one gateway's unit of work, tests). */
export class MemoryFailureLog implements FailureLog {
  private readonly failures = new Map<string, number[]>();

  async add(keys: readonly string[], at: number): Promise<void> {
    for (const key of keys) this.failures.set(key, [...(this.failures.get(key) ?? []), at]);
  }

  async timesAfter(key: string, after: number): Promise<number[]> {
    return (this.failures.get(key) ?? []).filter((t) => t > after);
  }

  async clear(key: string): Promise<void> {
    this.failures.delete(key);
  }

  async prune(before: number): Promise<void> {
    for (const [key, times] of this.failures) {
      const kept = times.filter((t) => t > before);
      if (kept.length > 0) this.failures.set(key, kept);
      else this.failures.delete(key);
    }
  }
}

/**
 * Who a client address is for the limits: an IPv4 address (also one mapped into IPv6) as it is, an IPv6 address
 * as its first `ipv6PrefixBits` bits, such as `2001:db8:0:1::/64`.
 */
export function limitedSource(clientAddress: string, ipv6PrefixBits: number): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(clientAddress);
  if (mapped) return mapped[1]!;
  if (!isIPv6(clientAddress)) return clientAddress;
  const groups = ipv6Groups(clientAddress);
  let bits = ipv6PrefixBits;
  const kept = groups.map((group) => {
    const take = Math.max(0, Math.min(16, bits));
    bits -= take;
    return take === 0 ? 0 : group & (0xffff << (16 - take)) & 0xffff;
  });
  return `${kept.map((group) => group.toString(16)).join(':')}/${ipv6PrefixBits}`;
}

/** The eight 16-bit groups of an IPv6 address (`::` expanded, a trailing dotted IPv4 part read as two groups). */
function ipv6Groups(address: string): number[] {
  let text = address.split('%')[0]!;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const parts = (side: string | undefined) =>
    side ? side.split(':').map((hex) => Number.parseInt(hex, 16)) : [];
  const left = parts(head);
  const right = parts(tail);
  return tail === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill(0), ...right];
}

const isIPv6 = (address: string) => isIP(address.split('%')[0]!) === 6;

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
  /** Where failures are counted; this process's memory unless given. */
  log?: FailureLog;
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
  private readonly log: FailureLog;
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
    this.log = options.log ?? new MemoryFailureLog();
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
  async retryAfterSeconds(keys: string[]): Promise<number> {
    const now = this.now();
    let retryAfterMs = 0;
    for (const key of keys) {
      const recent = await this.recent(key, now);
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
  async assertAllowed(keys: string[]): Promise<void> {
    const retryAfter = await this.retryAfterSeconds(keys);
    if (retryAfter > 0) throw errors.rateLimited(retryAfter);
  }

  /** How long a password check for `username` waits first: 0 until the per-username ceiling is passed. */
  async delayFor(username: string): Promise<number> {
    const over =
      (await this.recent(FailureRateLimiter.accountKey(username), this.now())).length - this.accountCeiling;
    return over < 0 ? 0 : Math.min(this.maxDelayMs, (over + 1) * this.delayStepMs);
  }

  /** Counts a failure against `keys` and, when there is one, against the username's slow-down count. */
  async recordFailure(keys: string[], username?: string): Promise<void> {
    const now = this.now();
    await this.log.add(
      username === undefined ? keys : [...keys, FailureRateLimiter.accountKey(username)],
      now,
    );
    await this.log.prune(now - this.windowMs);
  }

  /** A correct secret clears the failures of that (username, address) pair; the address keeps its count. */
  async recordSuccess(username: string, clientAddress: string): Promise<void> {
    await this.log.clear(FailureRateLimiter.pairKey(username, clientAddress));
  }

  private recent(key: string, now: number): Promise<number[]> {
    return this.log.timesAfter(key, now - this.windowMs);
  }
}
