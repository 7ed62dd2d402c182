import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { assertError } from '../helpers/expect.js';
import { SseClient } from '../helpers/sse-client.js';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/** Tokens in URLs end up in proxy and access logs: the API takes them only where a browser has no header. */
describe('attack: an API token in the query string', () => {
  let t: TestGateway;
  before(async () => {
    t = await startTestGateway('sqlite');
    await t.listen();
  });
  after(() => t.close());

  it('is refused on admin and user routes with a 401 that says to use the header', async () => {
    const user = await t.createUser('urluser');
    for (const [url, token] of [
      ['/v1/admin/users', t.adminToken],
      ['/v1/user/ssh-keys', user.token],
      ['/v1/user/hosts', user.token],
    ] as const) {
      const response = await t.request('GET', `${url}?token=${encodeURIComponent(token)}`, { token: null });
      const body = assertError(response, 401, 'unauthorized');
      assert.match(body.error, /Authorization header/);
    }
  });

  it('still opens the SSE streams, where a browser cannot send a header', async () => {
    const client = await SseClient.open(`${t.url}/v1/admin/sse?token=${encodeURIComponent(t.adminToken)}`);
    try {
      assert.equal(client.status, 200);
      await client.waitFor((c) =>
        c.frames.some((f) => f.comment === ' connected' || f.comment === 'connected'),
      );
    } finally {
      client.close();
    }
  });
});
