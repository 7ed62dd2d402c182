import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { needs } from '../../../../test/support/needs.js';
import {
  createPostgresDatabase,
  POSTGRES_ADMIN_URL,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';

async function eventually<T>(what: string, check: () => Promise<T | undefined>, ms = 5_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// Two gateways on one PostgreSQL database: what one caches (users list, token checks), the other's writes end.
describe('two gateways sharing one PostgreSQL database', { skip: needs('postgres') }, () => {
  let database: Awaited<ReturnType<typeof createPostgresDatabase>>;
  let a: TestGateway;
  let b: TestGateway;
  before(async () => {
    database = await createPostgresDatabase();
    const shared = { DATABASE_URL: database.url, ADMIN_JWT_SECRET: randomBytes(36).toString('base64') };
    a = await startTestGateway('postgres', { ...shared, NODE_NAME: 'a' });
    b = await startTestGateway('postgres', { ...shared, NODE_NAME: 'b' });
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await database?.drop();
  });

  const listedBy = async (gateway: TestGateway) =>
    ((await gateway.request('GET', '/v1/admin/users')).body.users as { username: string }[]).map(
      (u) => u.username,
    );

  it("shows a user the other gateway created, in A's (cached) list", async () => {
    assert.ok(!(await listedBy(a)).includes('made-by-b'));
    await b.createUser('made-by-b');
    await eventually('A to list it', async () =>
      (await listedBy(a)).includes('made-by-b') ? true : undefined,
    );
  });

  it('ends a token at A at once when B disables its user', async () => {
    const user = await a.createUser('disabled-by-b');
    const asUser = () => a.request('GET', '/v1/user/hosts', { token: user.token });
    assert.equal((await asUser()).status, 200);
    assert.equal((await asUser()).status, 200, 'now from the cache');
    await b.request('PATCH', `/v1/admin/users/${user.id}`, { body: { status: 'disabled' } });
    await eventually(
      'A to refuse the token',
      async () => ((await asUser()).status === 401 ? true : undefined),
      1_000,
    );
  });

  it('stops trusting its cache while it cannot hear the other gateway, and trusts it again once it can', async () => {
    await listedBy(a);
    assert.equal(a.gateway.database.changes.live, true);
    const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
    await admin.connect();
    try {
      const name = new URL(database.url).pathname.slice(1);
      await admin.query(
        "select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and query = 'listen ccp_changes'",
        [name],
      );
    } finally {
      await admin.end();
    }
    await eventually('A to notice', async () => (a.gateway.database.changes.live ? undefined : true));
    await b.createUser('made-while-deaf');
    assert.ok((await listedBy(a)).includes('made-while-deaf'), 'read from the database, not the cache');
    await eventually('A to listen again', async () => (a.gateway.database.changes.live ? true : undefined));
    await b.createUser('made-after');
    await eventually('A to list it', async () =>
      (await listedBy(a)).includes('made-after') ? true : undefined,
    );
  });
});
