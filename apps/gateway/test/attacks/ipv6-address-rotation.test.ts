import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/**
 * Hardening issue, point 5: limits counted per full address, and an IPv6 attacker holds a /64 (2^64 addresses):
 * a new address for every guess was never limited, and each could fill the password-check pool's per-address
 * share. A /64 (RATE_LIMIT_IPV6_PREFIX) is one caller now.
 */
describe('attack: guessing from a new IPv6 address each time', () => {
  let t: TestGateway;
  before(async () => {
    t = await startTestGateway('sqlite');
    await t.createUser('target');
  });
  after(() => t?.close());

  const loginFrom = (remoteAddress: string, password: string) =>
    t.gateway.http
      .inject({
        method: 'POST',
        url: '/v1/auth/login',
        remoteAddress,
        payload: { username: 'target', password },
      })
      .then((response) => ({ status: response.statusCode, body: response.json() }));

  it('is limited as one caller per /64, and another /64 is not', async () => {
    const statuses: number[] = [];
    for (let i = 1; i <= 14; i++)
      statuses.push((await loginFrom(`2001:db8:0:7::${i.toString(16)}`, `guess-${i}`)).status);
    assert.deepEqual(statuses.slice(0, 10), Array(10).fill(401));
    assert.ok(
      statuses.slice(10).every((status) => status === 429),
      `past ten guesses: ${statuses.slice(10)}`,
    );
    // A neighbour in another /64 is not locked out by it.
    assert.equal((await loginFrom('2001:db8:0:8::1', 'guess-x')).status, 401);
  });

  it('a burst from many addresses of one /64 gets the share of one address in the password checks', async () => {
    const burst = await Promise.all(
      Array.from({ length: 20 }, (_, i) => loginFrom(`2001:db8:0:9::${(i + 1).toString(16)}`, `burst-${i}`)),
    );
    assert.ok(
      burst.some((answer) => answer.status === 429),
      `no request of the burst was held back: ${burst.map((answer) => answer.status)}`,
    );
  });
});
