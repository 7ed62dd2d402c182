import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { needs } from '../../../../test/support/needs.js';
import { SseClient } from '../helpers/sse-client.js';
import { createPostgresDatabase, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/** Two gateways on one PostgreSQL database: a revocation made at one must end live access held at the other. */
describe('attack: keeping access open through another gateway', {
  skip: needs('postgres'),
}, () => {
  let database: Awaited<ReturnType<typeof createPostgresDatabase>>;
  let a: TestGateway;
  let b: TestGateway;
  before(async () => {
    database = await createPostgresDatabase();
    const shared = { DATABASE_URL: database.url, ADMIN_JWT_SECRET: randomBytes(36).toString('base64') };
    a = await startTestGateway('postgres', shared);
    b = await startTestGateway('postgres', shared);
    await b.listen();
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await database?.drop();
  });

  it('a password change at one gateway ends the user’s live stream at the other', async () => {
    const user = await a.createUser('held-at-b');
    const stream = await SseClient.open(`${b.url}/v1/user/sse?token=${user.token}`);
    try {
      assert.equal(stream.status, 200);
      const changed = await a.request('POST', '/v1/user/change-password', {
        token: user.token,
        body: { old_password: user.password, new_password: 'changed-at-a-1' },
      });
      assert.equal(changed.status, 200, JSON.stringify(changed.body));
      await stream.waitFor((s) => s.ended, 5_000);
    } finally {
      stream.close();
    }
  });
});
