import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ADMIN_PASSWORD, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/**
 * Hardening issue, point 6: event streams were never checked again after they opened, so a stream outlived the
 * token that opened it, and any change whose revocation notice did not arrive (another gateway's, through a
 * change feed that dropped it) left it open for good. SSH sessions were re-checked; streams now are too.
 */
/** A gateway with 1-second heartbeats (when streams are re-checked) and the given token lifetime. */
function gatewayWith(tokenTtl: string) {
  const gw = {
    t: null as unknown as TestGateway,
    async login(username: string, password: string) {
      const response = await fetch(`${gw.t.url}/v1/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username, password }),
      });
      assert.equal(response.status, 200);
      return ((await response.json()) as { token: string }).token;
    },
    /** Opens a stream; the milliseconds it lived, or null if it was still open after `ms`. */
    async streamLife(path: string, token: string, ms: number, meanwhile?: () => Promise<unknown>) {
      const controller = new AbortController();
      const opened = Date.now();
      const response = await fetch(`${gw.t.url}${path}?token=${token}`, { signal: controller.signal });
      assert.equal(response.status, 200);
      const reader = response.body!.getReader();
      const ended = (async () => {
        for (;;) if ((await reader.read()).done) return Date.now() - opened;
      })().catch(() => null);
      await meanwhile?.();
      const lived = await Promise.race([
        ended,
        new Promise<null>((resolve) => setTimeout(() => resolve(null), ms)),
      ]);
      controller.abort();
      return lived;
    },
  };
  before(async () => {
    gw.t = await startTestGateway('sqlite', { TOKEN_TTL: tokenTtl, SSE_HEARTBEAT_SECONDS: '1' });
    await gw.t.listen();
  });
  after(() => gw.t?.close());
  return gw;
}

describe('attack: an event stream kept past the token that opened it', () => {
  const gw = gatewayWith('3s');
  it("ends an administrator's stream when the token that opened it expires", async () => {
    const token = await gw.login('admin', ADMIN_PASSWORD);
    const lived = await gw.streamLife('/v1/admin/sse', token, 8000);
    assert.ok(lived !== null, 'the stream outlived its token by 5 seconds');
    assert.ok(lived >= 2000 && lived <= 5000, `ended after ${lived} ms (token lives 3 s)`);
  });
});

describe('attack: an event stream kept past the rights that opened it', () => {
  const gw = gatewayWith('12h');
  it("ends a user's stream at once when the account is disabled", async () => {
    const user = await gw.t.createUser('streamer');
    const token = await gw.login('streamer', user.password);
    const lived = await gw.streamLife('/v1/user/sse', token, 2500, async () => {
      const disabled = await gw.t.request('PATCH', `/v1/admin/users/${user.id}`, {
        body: { status: 'disabled' },
      });
      assert.equal(disabled.status, 200);
    });
    assert.ok(lived !== null && lived < 2000, `lived ${lived} ms`);
  });

  it('ends a stream whose credentials changed although no notice of it came (a lost change-feed message)', async () => {
    const user = await gw.t.createUser('lost-notice');
    const token = await gw.login('lost-notice', user.password);
    // What another gateway's password change leaves in the shared database when its notice never arrives here.
    const lived = await gw.streamLife('/v1/user/sse', token, 2800, () =>
      gw.t.gateway.repositories.users.revokeTokens(user.id),
    );
    assert.ok(lived !== null, 'the stream stayed open on a token version that moved on');
  });
});
