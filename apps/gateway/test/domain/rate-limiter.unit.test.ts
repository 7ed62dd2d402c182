import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FailureRateLimiter, limitedSource } from '../../src/domain/access/rate-limiter.js';
import { DomainError } from '../../src/domain/errors.js';

function clock(start = 1_000_000) {
  const c = { now: start, advance: (ms: number) => (c.now += ms) };
  return c;
}

async function refusal(limiter: FailureRateLimiter, keys: string[]): Promise<DomainError> {
  try {
    await await limiter.assertAllowed(keys);
  } catch (error) {
    assert.ok(error instanceof DomainError);
    return error;
  }
  return assert.fail(`expected ${keys.join(',')} to be refused`);
}

describe('FailureRateLimiter', () => {
  it('keys by (lower-cased username, client address) pair and by client address', () => {
    assert.deepEqual(FailureRateLimiter.keysFor('Alice', '10.0.0.1'), [
      'pair:alice@10.0.0.1',
      'addr:10.0.0.1',
    ]);
  });

  it('allows 10 failures in 5 minutes and refuses the 11th attempt as rate limited, with when to retry', async () => {
    const c = clock();
    const limiter = new FailureRateLimiter({ now: () => c.now });
    const keys = FailureRateLimiter.keysFor('alice', '10.0.0.1');
    for (let i = 0; i < 10; i++) {
      await limiter.assertAllowed(keys);
      await limiter.recordFailure(keys);
      c.advance(1000);
    }
    const error = await refusal(limiter, keys);
    assert.equal(error.kind, 'rate_limited');
    assert.equal(error.code, 'rate_limited');
    // The first failure was 10 s ago and leaves the 300 s window in 290 s.
    assert.equal(error.extra.retry_after, 290);
  });

  it('counts each key separately: the pair, and the address for any username; never the username alone', async () => {
    const c = clock();
    const limiter = new FailureRateLimiter({ now: () => c.now });
    for (let i = 0; i < 10; i++)
      await limiter.recordFailure(FailureRateLimiter.keysFor('alice', '10.0.0.1'), 'alice');
    assert.equal(
      (await refusal(limiter, FailureRateLimiter.keysFor('ALICE', '10.0.0.1'))).kind,
      'rate_limited',
    );
    for (let i = 0; i < 10; i++)
      await limiter.recordFailure(FailureRateLimiter.keysFor('alice', `10.0.1.${i}`), 'alice');
    // Failures from other addresses never refuse the account.
    await limiter.assertAllowed(FailureRateLimiter.keysFor('alice', '192.168.1.1'));
    await limiter.assertAllowed(FailureRateLimiter.keysFor('bob', '10.0.1.1'));

    for (let i = 0; i < 10; i++)
      await limiter.recordFailure(FailureRateLimiter.keysFor(`user${i}`, '172.16.0.1'));
    assert.equal(
      (await refusal(limiter, FailureRateLimiter.keysFor('carol', '172.16.0.1'))).kind,
      'rate_limited',
    );
    await limiter.assertAllowed(FailureRateLimiter.keysFor('carol', '172.16.0.2'));
  });

  it('slides the window: each failure stops counting 5 minutes after it happened', async () => {
    const c = clock();
    const limiter = new FailureRateLimiter({ now: () => c.now });
    const keys = FailureRateLimiter.keysFor('alice', '10.0.0.1');
    await limiter.recordFailure(keys);
    c.advance(60_000);
    for (let i = 0; i < 9; i++) await limiter.recordFailure(keys);
    assert.equal((await refusal(limiter, keys)).extra.retry_after, 240);
    c.advance(239_999);
    await refusal(limiter, keys);
    c.advance(1);
    await limiter.assertAllowed(keys); // the first failure left the window; 9 remain
    await limiter.recordFailure(keys);
    assert.equal((await refusal(limiter, keys)).extra.retry_after, 60);
    c.advance(60_000);
    await limiter.assertAllowed(keys);
  });

  it('rounds Retry-After up and never answers 0', async () => {
    const c = clock();
    const limiter = new FailureRateLimiter({ now: () => c.now, maxFailures: 2, windowMs: 10_000 });
    const keys = ['user:x'];
    await limiter.recordFailure(keys);
    await limiter.recordFailure(keys);
    c.advance(9_999);
    assert.equal((await refusal(limiter, keys)).extra.retry_after, 1);
    c.advance(1);
    await limiter.assertAllowed(keys);
  });

  it('a success clears the failures of that pair but not those of the address', async () => {
    const c = clock();
    const limiter = new FailureRateLimiter({ now: () => c.now });
    for (let i = 0; i < 9; i++) await limiter.recordFailure(FailureRateLimiter.keysFor('alice', '10.0.0.1'));
    await limiter.recordFailure(FailureRateLimiter.keysFor('alice', '10.0.0.2'));
    await limiter.recordSuccess('Alice', '10.0.0.1');
    await limiter.assertAllowed(FailureRateLimiter.keysFor('alice', '10.0.0.1').slice(0, 1));
    await limiter.recordFailure(FailureRateLimiter.keysFor('bob', '10.0.0.1'));
    await refusal(limiter, FailureRateLimiter.keysFor('bob', '10.0.0.1'));
  });

  it('slows a username down past its ceiling of failures from all addresses, up to a cap, without refusing it', async () => {
    const c = clock();
    const limiter = new FailureRateLimiter({
      now: () => c.now,
      accountCeiling: 5,
      delayStepMs: 100,
      maxDelayMs: 250,
    });
    for (let i = 0; i < 4; i++)
      await limiter.recordFailure(FailureRateLimiter.keysFor('alice', `10.0.0.${i}`), 'alice');
    assert.equal(await limiter.delayFor('ALICE'), 0);
    await limiter.recordFailure(FailureRateLimiter.keysFor('alice', '10.0.0.9'), 'alice');
    assert.equal(await limiter.delayFor('alice'), 100);
    await limiter.recordFailure(FailureRateLimiter.keysFor('alice', '10.0.0.10'), 'alice');
    assert.equal(await limiter.delayFor('alice'), 200);
    for (let i = 0; i < 5; i++)
      await limiter.recordFailure(FailureRateLimiter.keysFor('alice', `10.0.2.${i}`), 'alice');
    assert.equal(await limiter.delayFor('alice'), 250);
    assert.equal(await limiter.delayFor('bob'), 0);
    await limiter.assertAllowed(FailureRateLimiter.keysFor('alice', '10.9.9.9'));
    c.advance(5 * 60_000);
    assert.equal(await limiter.delayFor('alice'), 0);
  });

  it('takes the later Retry-After when both keys are over the limit', async () => {
    const c = clock();
    const limiter = new FailureRateLimiter({ now: () => c.now });
    for (let i = 0; i < 10; i++) await limiter.recordFailure(['pair:alice@10.0.0.1']);
    c.advance(100_000);
    for (let i = 0; i < 10; i++) await limiter.recordFailure(['addr:10.0.0.1']);
    assert.equal(
      (await refusal(limiter, FailureRateLimiter.keysFor('alice', '10.0.0.1'))).extra.retry_after,
      300,
    );
    assert.equal((await refusal(limiter, ['pair:alice@10.0.0.1', 'addr:10.0.0.9'])).extra.retry_after, 200);
  });
});

describe('who a client address is for the limits', () => {
  it('an IPv4 address, plain or mapped into IPv6, is itself', () => {
    assert.equal(limitedSource('203.0.113.9', 64), '203.0.113.9');
    assert.equal(limitedSource('::ffff:203.0.113.9', 64), '203.0.113.9');
  });
  it('an IPv6 address is its prefix: every address of one /64 is one caller', () => {
    assert.equal(limitedSource('2001:db8:0:1::1', 64), '2001:db8:0:1:0:0:0:0/64');
    assert.equal(limitedSource('2001:db8:0:1:ffff:ab:cd:ef', 64), '2001:db8:0:1:0:0:0:0/64');
    assert.notEqual(limitedSource('2001:db8:0:2::1', 64), limitedSource('2001:db8:0:1::1', 64));
    assert.equal(limitedSource('2001:db8:0:1::1%eth0', 64), '2001:db8:0:1:0:0:0:0/64');
    assert.equal(limitedSource('2001:db8:ab:cdff::', 56), '2001:db8:ab:cd00:0:0:0:0/56');
    assert.equal(limitedSource('::1', 128), '0:0:0:0:0:0:0:1/128');
    assert.equal(limitedSource('64:ff9b::198.51.100.7', 128), '64:ff9b:0:0:0:0:c633:6407/128');
  });
});
