import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { needs } from '../../../../test/support/needs.js';
import { SseClient } from '../helpers/sse-client.js';
import { createPostgresDatabase, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/**
 * Two gateways on one PostgreSQL database: a live message made at one reaches the streams held at the other, with
 * the same id, and a stream resumes at either gateway from the last id it saw.
 */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('SSE across gateways', { skip: needs('postgres') }, () => {
  let database: Awaited<ReturnType<typeof createPostgresDatabase>>;
  let a: TestGateway;
  let b: TestGateway;
  let exitId: string;
  const shared = { DATABASE_URL: '', ADMIN_JWT_SECRET: randomBytes(36).toString('base64') };
  const open: SseClient[] = [];
  const stream = async (url: string, headers: Record<string, string> = {}) => {
    const client = await SseClient.open(url, headers);
    open.push(client);
    assert.equal(client.status, 200, client.body);
    return client;
  };
  const adminStream = (gateway: TestGateway, headers: Record<string, string> = {}) =>
    stream(`${gateway.url}/v1/admin/sse?topics=hosts&token=${gateway.adminToken}`, headers);
  const createHost = async (userId: string): Promise<string> => {
    const host = await a.request('POST', '/v1/admin/hosts', {
      body: { user_id: userId, egress_ip_id: exitId },
    });
    assert.equal(host.status, 201, JSON.stringify(host.body));
    return host.body.id;
  };
  const deleteHost = async (hostId: string) => {
    assert.equal((await a.request('DELETE', `/v1/admin/hosts/${hostId}`)).status, 204);
  };
  /** Both gateways lose their LISTEN connection (each reconnects about a second later); returns once B noticed. */
  const dropListenConnections = async () => {
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    try {
      const ended = await admin.query(
        `select pg_terminate_backend(pid, 5000) from pg_stat_activity
         where datname = current_database() and query ilike 'listen %' and pid <> pg_backend_pid()`,
      );
      assert.equal(ended.rowCount, 2);
    } finally {
      await admin.end();
    }
    for (let i = 0; i < 500 && b.gateway.database.changes.live; i++) await sleep(10);
    assert.equal(b.gateway.database.changes.live, false, 'the drop was noticed');
    await sleep(50); // B's read on noticing the drop is over before anything changes
  };
  /** The messages a stream got about `hostIds`, as [id, action, SSE id]. */
  const about = (client: SseClient, hostIds: string[]) =>
    client
      .messages()
      .filter((m) => hostIds.includes(m.data.id))
      .map((m) => [m.data.id, m.data.action, m.id]);

  before(async () => {
    database = await createPostgresDatabase();
    shared.DATABASE_URL = database.url;
    a = await startTestGateway('postgres', { ...shared, NODE_NAME: 'a' });
    b = await startTestGateway('postgres', { ...shared, NODE_NAME: 'b' });
    await a.listen();
    await b.listen();
    const exit = await a.request('POST', '/v1/admin/egress-ips', {
      body: {
        label: 'exit',
        ip_address: '198.51.100.51',
        proxy_config: { type: 'socks', server: '198.51.100.51', server_port: 1080, version: '5' },
      },
    });
    exitId = exit.body.id;
  });
  after(async () => {
    for (const client of open) client.close();
    await a?.close();
    await b?.close();
    await database?.drop();
  });

  it('a host made at one gateway reaches admin streams at both with one id, and only its owner’s stream', async () => {
    const alice = await a.createUser('alice-at-b');
    const bob = await a.createUser('bob-at-b');
    const adminAtA = await adminStream(a);
    const adminAtB = await adminStream(b);
    const aliceAtB = await stream(`${b.url}/v1/user/sse?token=${alice.token}`);
    const bobAtB = await stream(`${b.url}/v1/user/sse?token=${bob.token}`);

    const alicesHost = await createHost(alice.id);
    const bobsHost = await createHost(bob.id);
    await adminAtB.waitFor((c) => about(c, [alicesHost, bobsHost]).length === 2);
    await adminAtA.waitFor((c) => about(c, [alicesHost, bobsHost]).length === 2);
    await bobAtB.waitFor((c) => about(c, [bobsHost]).length === 1);
    await aliceAtB.waitFor((c) => about(c, [alicesHost]).length === 1);
    assert.deepEqual(about(adminAtB, [alicesHost, bobsHost]), about(adminAtA, [alicesHost, bobsHost]));

    const created = adminAtB.messages().find((m) => m.data.id === alicesHost)!;
    const seen = aliceAtB.messages().find((m) => m.data.id === alicesHost)!;
    assert.equal(seen.id, created.id, 'the same id on every stream');
    assert.match(created.data.payload.vnc_url, /\/v1\/admin\//);
    assert.match(seen.data.payload.vnc_url, /\/v1\/user\//, "the owner gets the user's view");
    assert.deepEqual(
      aliceAtB.messages().map((m) => m.data.payload?.user_id),
      [alice.id],
      'nothing of another user',
    );
    assert.deepEqual(
      bobAtB.messages().map((m) => m.data.payload?.user_id),
      [bob.id],
    );
  });

  it('a stream cut at one gateway resumes at the other from its last id, without gaps or repeats', async () => {
    const carol = await a.createUser('carol-resumes');
    const watcher = await adminStream(a);
    const moving = await adminStream(a);
    const first = await createHost(carol.id);
    await moving.waitFor((c) => about(c, [first]).length === 1);
    const lastSeen = moving.messages().at(-1)!.id!;
    moving.close();

    const second = await createHost(carol.id);
    await deleteHost(first);
    const third = await createHost(carol.id);
    const hosts = [first, second, third];
    await watcher.waitFor((c) => about(c, hosts).length === 4);
    const missed = watcher.messages().filter((m) => Number(m.id) > Number(lastSeen));

    const resumed = await adminStream(b, { 'last-event-id': lastSeen });
    await resumed.waitFor((c) => c.messages().length >= missed.length);
    await deleteHost(second); // one live message after the replay, so none can still be on its way
    await resumed.waitFor((c) => about(c, [second]).some(([, action]) => action === 'delete'));
    await watcher.waitFor((c) => about(c, [second]).some(([, action]) => action === 'delete'));
    assert.deepEqual(
      resumed.messages(),
      watcher.messages().filter((m) => Number(m.id) > Number(lastSeen)),
    );
    assert.deepEqual(
      about(resumed, hosts).map(([id, action]) => [id, action]),
      [
        [second, 'create'],
        [first, 'delete'],
        [third, 'create'],
        [second, 'delete'],
      ],
    );
  });

  it('a gateway started after the changes resumes a stream from the table', async () => {
    const erin = await a.createUser('erin-resumes-later');
    const watcher = await adminStream(a);
    const made = [await createHost(erin.id), await createHost(erin.id), await createHost(erin.id)];
    await watcher.waitFor((c) => about(c, made).length === 3);
    const [firstSeen, ...missed] = watcher.messages().filter((m) => made.includes(m.data.id));
    const later = await startTestGateway('postgres', {
      ...shared,
      NODE_NAME: 'c',
    });
    try {
      await later.listen();
      const resumed = await adminStream(later, { 'last-event-id': firstSeen!.id! });
      await resumed.waitFor((c) => c.messages().length >= missed.length);
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.deepEqual(resumed.messages(), missed);
    } finally {
      await later.close();
    }
  });

  it('the table keeps a bounded number of rows, the newest', async () => {
    const rows = a.gateway.repositories.liveMessages;
    const newest = await rows.newest(5);
    assert.equal(newest.length, 5, 'earlier tests made at least five messages');
    await rows.prune(5);
    assert.deepEqual(await rows.newest(1000), newest);
  });

  it('a gateway whose LISTEN connection dropped catches up from the table when it is back', async () => {
    const dave = await a.createUser('dave-while-down');
    const watcher = await adminStream(a);
    const atB = await adminStream(b);
    await dropListenConnections();
    const made = [await createHost(dave.id), await createHost(dave.id)];
    await watcher.waitFor((c) => about(c, made).length === 2);
    assert.deepEqual(about(atB, made), [], 'B heard nothing while it did not listen');
    await atB.waitFor((c) => about(c, made).length === 2, 10_000);
    assert.ok(b.gateway.database.changes.live, 'only once it listened again');
    assert.deepEqual(about(atB, made), about(watcher, made));
  });

  it('a stream moving to a gateway that has not read its last message yet does not get it again', async () => {
    const frank = await a.createUser('frank-moves-early');
    const watcher = await adminStream(a);
    await dropListenConnections();
    const made = [await createHost(frank.id), await createHost(frank.id)];
    await watcher.waitFor((c) => about(c, made).length === 2);
    const [seenAtA, missedAtB] = watcher.messages().filter((m) => made.includes(m.data.id));
    assert.equal(b.gateway.database.changes.live, false, 'B has not heard of them');
    const movedToB = await adminStream(b, { 'last-event-id': seenAtA!.id! });
    await movedToB.waitFor((c) => c.messages().length >= 1);
    await deleteHost(made[0]!); // one live message after, so none can still be on its way
    await movedToB.waitFor((c) => c.messages().length >= 2, 10_000);
    assert.deepEqual(movedToB.messages().slice(0, 1), [missedAtB]);
    assert.deepEqual(about(movedToB, made).at(-1)?.slice(0, 2), [made[0], 'delete']);
  });
});
