import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { needs } from '../../../../test/support/needs.js';
import { MemoryRuntime } from '../helpers/memory-runtime.js';
import { passingTester } from '../helpers/passing-tester.js';
import {
  createPostgresDatabase,
  DATABASES,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';

type Answer = { status: number; body: any };
/** Each answer's status and error code, sorted, for a message that says what came back. */
const outcomes = (answers: Answer[]) =>
  answers.map((a) => `${a.status}${a.body?.code ? ` ${a.body.code}` : ''}`).sort();

/**
 * Starts of a user's hosts asked at the same moment, spread over the gateways given (the user's token on every
 * other one): with a quota of one running host, exactly one passes and one host runs.
 */
async function simultaneousStarts(gateways: TestGateway[], exit: string, username: string): Promise<void> {
  const [first] = gateways;
  const user = await first!.createUser(username);
  await first!.request('PUT', `/v1/admin/users/${user.id}/resources`, {
    body: { quotas: { running_hosts: 1 } },
  });
  const hosts: string[] = [];
  for (let i = 0; i < 4; i++)
    hosts.push((await first!.createHost(user.id, exit, { start: false })).id as string);
  const answers = await Promise.all(
    hosts.map((id, i) => {
      const via = gateways[i % gateways.length]!;
      return i % 2
        ? via.request('POST', `/v1/user/hosts/${id}/start`, { token: user.token })
        : via.request('POST', `/v1/admin/hosts/${id}/start`);
    }),
  );
  assert.deepEqual(outcomes(answers), [
    '202',
    '409 quota_exceeded',
    '409 quota_exceeded',
    '409 quota_exceeded',
  ]);
  for (const refused of answers.filter((a) => a.status === 409))
    assert.equal(refused.body.quota, 'running_hosts');
  const until = Date.now() + 15_000;
  for (;;) {
    await Promise.all(gateways.map((g) => g.gateway.tasks.idle()));
    const statuses = await Promise.all(
      hosts.map(async (id) => (await first!.request('GET', `/v1/admin/hosts/${id}`)).body.status),
    );
    if (!statuses.includes('starting') || Date.now() > until) {
      assert.deepEqual(statuses.sort(), ['created', 'created', 'created', 'running']);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Creations of hosts for one user at the same moment, spread over the gateways: a quota of one host holds. */
async function simultaneousCreations(gateways: TestGateway[], exit: string, username: string): Promise<void> {
  const [first] = gateways;
  const user = await first!.createUser(username);
  await first!.request('PUT', `/v1/admin/users/${user.id}/resources`, { body: { quotas: { hosts: 1 } } });
  const answers = await Promise.all(
    [0, 1, 2, 3].map((i) =>
      gateways[i % gateways.length]!.request('POST', '/v1/admin/hosts', {
        body: { user_id: user.id, egress_ip_id: exit },
      }),
    ),
  );
  assert.deepEqual(outcomes(answers), [
    '201',
    '409 quota_exceeded',
    '409 quota_exceeded',
    '409 quota_exceeded',
  ]);
  const usage = await first!.request('GET', `/v1/admin/users/${user.id}/resources`);
  assert.equal(usage.body.usage.hosts, 1);
}

/**
 * Resizes of a user's two running hosts asked at the same moment, spread over the gateways, each growing its memory
 * by 1 GiB where the quota leaves room for one: exactly one passes, and the use never goes past the quota.
 */
async function simultaneousResizes(gateways: TestGateway[], exit: string, username: string): Promise<void> {
  const [first] = gateways;
  const user = await first!.createUser(username);
  const hosts: string[] = [];
  for (let i = 0; i < 2; i++) {
    // Both on the first gateway's node (where its task runner starts them); the resizes come in at each gateway.
    const id = (await first!.createHost(user.id, exit, gateways.length > 1 ? { node: 'a' } : {}))
      .id as string;
    const sized = await first!.request('PUT', `/v1/admin/hosts/${id}/resources`, {
      body: { memory_mb: 1024 },
    });
    assert.equal(sized.status, 200, JSON.stringify(sized.body));
    hosts.push(id);
  }
  await first!.request('PUT', `/v1/admin/users/${user.id}/resources`, {
    body: { quotas: { memory_mb: 3072 } },
  });
  const answers = await Promise.all(
    hosts.map((id, i) =>
      gateways[i % gateways.length]!.request('PUT', `/v1/admin/hosts/${id}/resources`, {
        body: { memory_mb: 2048 },
      }),
    ),
  );
  assert.deepEqual(outcomes(answers), ['200', '409 quota_exceeded']);
  const usage = await first!.request('GET', `/v1/admin/users/${user.id}/resources`);
  assert.equal(usage.body.usage.memory_mb, 3072);
}

/**
 * Each quota refuses what would pass it with 409 `quota_exceeded` naming the quota and its use, through the API
 * an administrator and a user call; resources resolve host, then owner, then gateway. (Real limits inside real
 * workspaces: test/runtime/resource-limits.test.ts.)
 */
for (const kind of DATABASES) {
  describe(`resources and quotas (${kind})`, () => {
    let t: TestGateway;
    let runtime: MemoryRuntime;
    let exit: string;

    before(async () => {
      runtime = new MemoryRuntime();
      t = await startTestGateway(
        kind,
        {
          WORKSPACE_CPUS: '1',
          WORKSPACE_MEMORY_MB: '1024',
          WORKSPACE_PIDS: '512',
          WORKSPACE_HOME_MB: '2048',
          // Memory and home checked every second, so an alert shows while the test looks.
          RESOURCE_CHECK_SECONDS: '1',
        },
        runtime,
        { egressTester: passingTester },
      );
      await t.listen();
      exit = await t.createEgressIp('198.51.100.21');
    });
    after(() => t.close());

    const newHost = (userId: string, resources?: Record<string, number | null>) =>
      t.request('POST', '/v1/admin/hosts', {
        body: { user_id: userId, egress_ip_id: exit, ...(resources ? { resources } : {}) },
      });
    const setQuotas = (userId: string, quotas: Record<string, number | null>) =>
      t.request('PUT', `/v1/admin/users/${userId}/resources`, { body: { quotas } });
    const start = async (hostId: string, token?: string) => {
      const response = await t.request(
        'POST',
        token ? `/v1/user/hosts/${hostId}/start` : `/v1/admin/hosts/${hostId}/start`,
        { token },
      );
      await t.gateway.tasks.idle();
      return response;
    };
    const assertQuota = (
      response: { status: number; body: any },
      quota: string,
      used: number,
      limit: number,
    ) => {
      assert.equal(response.status, 409, JSON.stringify(response.body));
      assert.equal(response.body.code, 'quota_exceeded');
      assert.equal(response.body.quota, quota);
      assert.equal(response.body.used, used);
      assert.equal(response.body.limit, limit);
      assert.match(response.body.error, new RegExp(`${used}.* of ${limit}`));
    };

    it('resolves resources: the host’s own, else the owner’s default, else the gateway’s', async () => {
      const user = await t.createUser('rita');
      const plain = (await newHost(user.id)).body;
      assert.deepEqual(plain.resources, { cpus: 1, memory_mb: 1024, pids: 512, home_mb: 2048 });
      await t.request('PUT', `/v1/admin/users/${user.id}/resources`, {
        body: { defaults: { memory_mb: 768, home_mb: 512 } },
      });
      const own = (await newHost(user.id, { cpus: 0.5 })).body;
      assert.deepEqual(own.resources, { cpus: 0.5, memory_mb: 768, pids: 512, home_mb: 512 });
      assert.deepEqual((await t.request('GET', `/v1/admin/hosts/${plain.id}`)).body.resources.memory_mb, 768);
      await start(own.id);
      assert.deepEqual(runtime.hosts.get(own.id)?.spec.limits, {
        cpus: 0.5,
        memoryMb: 768,
        pids: 512,
        homeMb: 512,
      });
      const bad = await t.request('PUT', `/v1/admin/hosts/${own.id}/resources`, { body: { memory_mb: 10 } });
      assert.equal(bad.status, 400);
    });

    it('refuses a host past the hosts quota', async () => {
      const user = await t.createUser('hana');
      assert.equal((await setQuotas(user.id, { hosts: 1 })).status, 200);
      assert.equal((await newHost(user.id)).status, 201);
      assertQuota(await newHost(user.id), 'hosts', 1, 1);
      const events = (await t.request('GET', `/v1/admin/events?user_id=${user.id}&type=quota.exceeded`)).body;
      assert.equal(events.events.length, 1);
    });

    it('refuses a start past the running hosts quota, for the user too, and lets it once one stopped', async () => {
      const user = await t.createUser('rudi');
      await setQuotas(user.id, { running_hosts: 1 });
      const a = (await newHost(user.id)).body;
      const b = (await newHost(user.id)).body;
      assert.equal((await start(a.id)).status, 202);
      assertQuota(await start(b.id, user.token), 'running_hosts', 1, 1);
      await t.request('POST', `/v1/admin/hosts/${a.id}/stop`);
      await t.gateway.tasks.idle();
      assert.equal((await start(b.id)).status, 202);
      assert.equal((await t.request('GET', `/v1/admin/hosts/${b.id}`)).body.status, 'running');
    });

    it('lets exactly one of simultaneous starts through a quota of one running host', () =>
      simultaneousStarts([t], exit, 'sami'));

    it('lets exactly one of simultaneous creations through a quota of one host', () =>
      simultaneousCreations([t], exit, 'sven'));

    it('lets exactly one of simultaneous resizes of running hosts through the memory quota', () =>
      simultaneousResizes([t], exit, 'rosa'));

    it('refuses a start past the CPU quota, and a resize of a running host past it', async () => {
      const user = await t.createUser('cora');
      await setQuotas(user.id, { cpus: 1.5 });
      const a = (await newHost(user.id)).body;
      const b = (await newHost(user.id, { cpus: 0.6 })).body;
      assert.equal((await start(a.id)).status, 202);
      assertQuota(await start(b.id), 'cpus', 1, 1.5);
      const grow = await t.request('PUT', `/v1/admin/hosts/${a.id}/resources`, { body: { cpus: 2 } });
      assertQuota(grow, 'cpus', 1, 1.5);
      const fits = await t.request('PUT', `/v1/admin/hosts/${b.id}/resources`, { body: { cpus: 0.5 } });
      assert.equal(fits.status, 200);
      assert.equal((await start(b.id)).status, 202);
    });

    it('keeps the size a host had when the engine refuses its resize, and the quota use with it', async () => {
      const user = await t.createUser('reni');
      await setQuotas(user.id, { memory_mb: 4096 });
      const host = (await newHost(user.id)).body;
      assert.equal((await start(host.id)).status, 202);
      runtime.failNextResize = 'resize_refused';
      const refused = await t.request('PUT', `/v1/admin/hosts/${host.id}/resources`, {
        body: { memory_mb: 2048 },
      });
      assert.equal(refused.status, 409, JSON.stringify(refused.body));
      assert.equal(refused.body.code, 'resize_refused');
      assert.match(refused.body.error, /stop the host and try again/);
      const after = (await t.request('GET', `/v1/admin/hosts/${host.id}`)).body;
      assert.equal(after.resources.memory_mb, 1024, 'the size it had');
      const usage = await t.request('GET', `/v1/admin/users/${user.id}/resources`);
      assert.equal(usage.body.usage.memory_mb, 1024);
    });

    it('refuses a start past the memory quota', async () => {
      const user = await t.createUser('mona');
      await setQuotas(user.id, { memory_mb: 1536 });
      const a = (await newHost(user.id)).body;
      const b = (await newHost(user.id, { memory_mb: 1024 })).body;
      assert.equal((await start(a.id)).status, 202);
      assertQuota(await start(b.id), 'memory_mb', 1024, 1536);
      // Stopped hosts can be made larger: only running ones count.
      const grow = await t.request('PUT', `/v1/admin/hosts/${b.id}/resources`, { body: { memory_mb: 4096 } });
      assert.equal(grow.status, 200);
      assert.equal(grow.body.resources.memory_mb, 4096);
    });

    it('refuses a host or a larger home past the home quota, and shows the use to admins and the user', async () => {
      const user = await t.createUser('hugo');
      await setQuotas(user.id, { home_mb: 3000 });
      const a = (await newHost(user.id)).body;
      assertQuota(await newHost(user.id, { home_mb: 1000 }), 'home_mb', 2048, 3000);
      assert.equal((await newHost(user.id, { home_mb: 900 })).status, 201);
      assertQuota(
        await t.request('PUT', `/v1/admin/hosts/${a.id}/resources`, { body: { home_mb: 2200 } }),
        'home_mb',
        2948,
        3000,
      );
      const usage = (await t.request('GET', `/v1/admin/users/${user.id}/resources`)).body;
      assert.deepEqual(usage.usage, { hosts: 2, running_hosts: 0, cpus: 0, memory_mb: 0, home_mb: 2948 });
      assert.equal(usage.quotas.home_mb, 3000);
      const all = (await t.request('GET', '/v1/admin/quotas')).body.users;
      assert.equal(all.find((u: any) => u.user_id === user.id).usage.home_mb, 2948);
      const own = await t.request('GET', '/v1/user/resources', { token: user.token });
      assert.equal(own.status, 200);
      assert.equal(own.body.usage.home_mb, 2948);
      assert.equal((await t.request('GET', '/v1/admin/quotas', { token: user.token })).status, 403);
    });

    it('refuses to shrink a home below its size', async () => {
      const user = await t.createUser('sina');
      const host = (await newHost(user.id, { home_mb: 1024 })).body;
      await start(host.id);
      const shrink = await t.request('PUT', `/v1/admin/hosts/${host.id}/resources`, {
        body: { home_mb: 512 },
      });
      assert.equal(shrink.status, 409);
      assert.equal(shrink.body.code, 'home_shrink');
    });

    it('shows memory near its limit on the host and in events, and clears it when it eases', async () => {
      const user = await t.createUser('pia');
      const host = (await newHost(user.id)).body;
      await start(host.id);
      const MiB = 1024 * 1024;
      runtime.usages.set(host.id, {
        memory: { workingSetBytes: 980 * MiB, limitBytes: 1024 * MiB, oomKills: 0 },
        home: { usedBytes: 100 * MiB, sizeBytes: 2048 * MiB },
      });
      const alerts = async () => (await t.request('GET', `/v1/admin/hosts/${host.id}`)).body.resource_alerts;
      const waitFor = async (check: (a: { kind: string }[]) => boolean) => {
        const until = Date.now() + 10_000;
        while (!check(await alerts())) {
          assert.ok(Date.now() < until, JSON.stringify(await alerts()));
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      };
      await waitFor((a) => a.some((alert) => alert.kind === 'memory_pressure'));
      const own = await t.request('GET', `/v1/user/hosts/${host.id}`, { token: user.token });
      assert.match(own.body.resource_alerts[0].message, /memory at 96% of its 1024 MiB/);
      runtime.usages.set(host.id, {
        memory: { workingSetBytes: 100 * MiB, limitBytes: 1024 * MiB, oomKills: 0 },
        home: { usedBytes: 100 * MiB, sizeBytes: 2048 * MiB },
      });
      await waitFor((a) => a.length === 0);
      const events = async (type: string) =>
        (await t.request('GET', `/v1/admin/events?host_id=${host.id}&type=${type}`)).body.events.length;
      assert.equal(await events('host.memory_pressure'), 1);
      assert.equal(await events('host.resource_alert_cleared'), 1);
      const metrics = await t.request('GET', '/metrics');
      const text = typeof metrics.body === 'string' ? metrics.body : JSON.stringify(metrics.body);
      assert.match(text, /ccp_user_quota_used\{username="pia",quota="running_hosts"\} 1/);
    });
  });
}

describe('quotas across two gateways on one PostgreSQL database', { skip: needs('postgres') }, () => {
  let database: Awaited<ReturnType<typeof createPostgresDatabase>>;
  const gateways: TestGateway[] = [];
  let exit: string;

  before(async () => {
    database = await createPostgresDatabase();
    const shared = { DATABASE_URL: database.url, ADMIN_JWT_SECRET: randomBytes(36).toString('base64') };
    const a = await startTestGateway('postgres', { ...shared, NODE_NAME: 'a' }, new MemoryRuntime(), {
      egressTester: passingTester,
    });
    gateways.push(a);
    gateways.push(
      await startTestGateway('postgres', { ...shared, NODE_NAME: 'b' }, new MemoryRuntime(), {
        egressTester: passingTester,
        secretsFrom: a.dataDir,
      }),
    );
    exit = await a.createEgressIp('198.51.100.22');
  });
  after(async () => {
    for (const gateway of gateways) await gateway.close();
    await database?.drop();
  });

  it('lets exactly one of starts asked at both gateways at once through a quota of one running host', () =>
    simultaneousStarts(gateways, exit, 'ines'));

  it('lets exactly one of creations asked at both gateways at once through a quota of one host', () =>
    simultaneousCreations(gateways, exit, 'olaf'));

  it('lets exactly one of resizes asked at both gateways at once through the memory quota', () =>
    simultaneousResizes(gateways, exit, 'rudi'));
});
