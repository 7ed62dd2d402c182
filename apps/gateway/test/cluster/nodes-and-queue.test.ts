import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { needs } from '../../../../test/support/needs.js';
import { sweepExpiredUsers } from '../../src/domain/users/expiry-sweep.js';
import { MemoryRuntime } from '../helpers/memory-runtime.js';
import { until } from '../helpers/openssh.js';
import { passingTester } from '../helpers/passing-tester.js';
import { SseClient } from '../helpers/sse-client.js';
import { createPostgresDatabase, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/**
 * Two gateways, nodes a and b, on one PostgreSQL database, each with its own engine (a runtime of its own): hosts
 * are placed on nodes, any gateway takes a request, the host's node does the work, and a node that goes silent
 * leaves its hosts `node_unavailable` until it returns.
 */
describe('two nodes on one PostgreSQL database: placement, the task queue, a lost node', {
  skip: needs('postgres'),
}, () => {
  let database: Awaited<ReturnType<typeof createPostgresDatabase>>;
  let shared: Record<string, string>;
  let a: TestGateway;
  let b: TestGateway;
  const engineA = new MemoryRuntime();
  let engineB = new MemoryRuntime();
  let exit: string;
  let user: { id: string };

  const startB = async (runtime: MemoryRuntime) => {
    const gateway = await startTestGateway('postgres', { ...shared, NODE_NAME: 'b' }, runtime, {
      secretsFrom: a.dataDir,
      egressTester: passingTester,
    });
    await gateway.listen();
    return gateway;
  };
  const hostOf = async (id: string) => (await a.request('GET', `/v1/admin/hosts/${id}`)).body;
  const taskOf = async (id: string) => (await a.request('GET', `/v1/admin/tasks/${id}`)).body;
  const ended = async (id: string) => {
    await until(`task ${id} to end`, async () => !['pending', 'running'].includes((await taskOf(id)).status));
    return taskOf(id);
  };
  const createHost = async (node?: string) => {
    const created = await a.request('POST', '/v1/admin/hosts', {
      body: { user_id: user.id, egress_ip_id: exit, ...(node ? { node } : {}) },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    return created.body as { id: string; node: string };
  };

  before(async () => {
    database = await createPostgresDatabase();
    shared = {
      DATABASE_URL: database.url,
      ADMIN_JWT_SECRET: randomBytes(36).toString('base64'),
      NODE_HEARTBEAT_SECONDS: '1',
      NODE_DEAD_SECONDS: '3',
    };
    a = await startTestGateway('postgres', { ...shared, NODE_NAME: 'a' }, engineA, {
      egressTester: passingTester,
    });
    await a.listen();
    b = await startB(engineB);
    user = await a.createUser('spread');
    exit = (
      await a.request('POST', '/v1/admin/egress-ips', {
        body: {
          label: 'exit',
          ip_address: '198.51.100.61',
          proxy_config: { type: 'socks', server: '198.51.100.61', server_port: 1080, version: '5' },
        },
      })
    ).body.id;
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await database?.drop();
  });

  it('lists both nodes as up, with their capacity, at either gateway', async () => {
    for (const gateway of [a, b]) {
      const { body } = await gateway.request('GET', '/v1/admin/nodes');
      assert.deepEqual(
        body.nodes.map((node: { name: string; state: string }) => [node.name, node.state]),
        [
          ['a', 'up'],
          ['b', 'up'],
        ],
      );
      assert.ok(
        body.nodes.every((node: { cpus: number; memory_mb: number }) => node.cpus > 0 && node.memory_mb > 0),
      );
      const stats = await gateway.request('GET', '/v1/admin/dashboard/stats');
      assert.equal(stats.body.nodes.length, 2);
    }
  });

  it('spreads new hosts over the nodes, and pins one where asked', async () => {
    const placed = [await createHost(), await createHost(), await createHost(), await createHost()];
    const counts = new Map<string, number>();
    for (const host of placed) counts.set(host.node, (counts.get(host.node) ?? 0) + 1);
    assert.deepEqual(Object.fromEntries(counts), { a: 2, b: 2 });
    assert.equal((await createHost('b')).node, 'b');
    const nowhere = await a.request('POST', '/v1/admin/hosts', {
      body: { user_id: user.id, node: 'nowhere' },
    });
    assert.equal(nowhere.status, 409);
    assert.equal(nowhere.body.code, 'node_unavailable');
    const nodes = (await a.request('GET', '/v1/admin/nodes')).body.nodes;
    assert.deepEqual(
      nodes.map((node: { name: string; hosts: number }) => [node.name, node.hosts]),
      [
        ['a', 2],
        ['b', 3],
      ],
    );
  });

  it('makes the workspace of a host created at one gateway ahead on its node, and only there', async () => {
    const host = await createHost('b');
    await until('node b to make it ahead', () => engineB.prepared.includes(host.id), 10_000);
    assert.ok(!engineA.prepared.includes(host.id), "node a's engine never made it");
    const own = await createHost('a');
    await until('node a to make its own', () => engineA.prepared.includes(own.id), 10_000);
    assert.ok(!engineB.prepared.includes(own.id));
  });

  it("runs a start asked at one gateway on the host's node, and only there", async () => {
    const host = await createHost('b');
    const accepted = await a.request('POST', `/v1/admin/hosts/${host.id}/start`);
    assert.equal(accepted.status, 202);
    const task = await ended(accepted.body.task_id);
    assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
    assert.equal(task.node, 'b');
    assert.equal(await engineB.state(host.id), 'running');
    assert.equal(await engineA.state(host.id), 'missing', "node a's engine never saw it");
    assert.equal((await hostOf(host.id)).status, 'running');
    const events = (await a.request('GET', `/v1/admin/events?type=task.start.succeeded&host_id=${host.id}`))
      .body;
    assert.match(events.events[0].message, /on node b/);

    // One task per host across gateways: a second request at the other gateway meets the first.
    engineB.delayMs = 500;
    const stop = await a.request('POST', `/v1/admin/hosts/${host.id}/stop`);
    const again = await b.request('POST', `/v1/admin/hosts/${host.id}/rebuild`);
    assert.equal(again.status, 409);
    assert.equal(again.body.code, 'host_busy');
    assert.equal(again.body.task_id, stop.body.task_id);
    const stopped = await ended(stop.body.task_id);
    assert.equal(stopped.status, 'succeeded', JSON.stringify(stopped));
    engineB.delayMs = 0;
    assert.equal(await engineB.state(host.id), 'stopped');
  });

  it('a stop at one gateway cancels a start hanging on the other node', async () => {
    const host = await createHost('b');
    engineB.holdStarts = true;
    try {
      const start = await a.request('POST', `/v1/admin/hosts/${host.id}/start`);
      await until(
        'the start to run on b',
        async () => (await taskOf(start.body.task_id)).status === 'running',
      );
      const stop = await a.request('POST', `/v1/admin/hosts/${host.id}/stop`);
      assert.equal(stop.status, 202, JSON.stringify(stop.body));
      const cancelled = await taskOf(start.body.task_id);
      assert.equal(cancelled.status, 'failed');
      assert.equal(cancelled.error.code, 'cancelled');
      assert.match(cancelled.error.message, /the host was stopped \(admin:admin\)/);
      assert.equal((await ended(stop.body.task_id)).status, 'succeeded');
      assert.ok(engineB.calls.includes(`start cancelled ${host.id}`));
    } finally {
      engineB.releaseStarts();
    }
  });

  it('deletes a host of the other node: that node removes its workspace, then the host is gone', async () => {
    const host = await createHost('b');
    const start = await a.request('POST', `/v1/admin/hosts/${host.id}/start`);
    await ended(start.body.task_id);
    assert.equal(await engineB.state(host.id), 'running');
    const deleted = await a.request('DELETE', `/v1/admin/hosts/${host.id}`);
    assert.equal(deleted.status, 204, JSON.stringify(deleted.body));
    assert.ok(engineB.calls.includes(`remove ${host.id}`));
    assert.ok(!engineA.calls.includes(`remove ${host.id}`));
    assert.equal((await a.request('GET', `/v1/admin/hosts/${host.id}`)).status, 404);
  });

  it('an egress IP edited at one gateway switches the running hosts of the other node', async () => {
    const host = await createHost('b');
    await ended((await b.request('POST', `/v1/admin/hosts/${host.id}/start`)).body.task_id);
    const edited = await a.request('PUT', `/v1/admin/egress-ips/${exit}`, {
      body: {
        label: 'exit',
        ip_address: '198.51.100.62',
        proxy_config: { type: 'socks', server: '198.51.100.62', server_port: 1080, version: '5' },
      },
    });
    assert.equal(edited.status, 200, JSON.stringify(edited.body));
    await until('node b to switch its host', () => engineB.calls.includes(`switch ${host.id} 198.51.100.62`));
  });

  it('an active egress IP unbound at one gateway moves a host of the other node to its standby', async () => {
    const host = await createHost('b');
    const standby = await a.request('POST', '/v1/admin/egress-ips', {
      body: {
        label: 'standby',
        ip_address: '198.51.100.63',
        proxy_config: { type: 'socks', server: '198.51.100.63', server_port: 1080, version: '5' },
      },
    });
    assert.equal(standby.status, 201, JSON.stringify(standby.body));
    const bound = await a.request('POST', '/v1/admin/bindings', {
      body: { host_id: host.id, egress_ip_id: standby.body.id },
    });
    assert.equal(bound.status, 201, JSON.stringify(bound.body));
    await ended((await b.request('POST', `/v1/admin/hosts/${host.id}/start`)).body.task_id);
    const active = ((await hostOf(host.id)).bindings as { id: string; active: boolean }[]).find(
      (x) => x.active,
    );
    assert.equal((await a.request('DELETE', `/v1/admin/bindings/${active!.id}`)).status, 204);
    await until('node b to switch its host', () => engineB.calls.includes(`switch ${host.id} 198.51.100.63`));
    assert.ok(!engineA.calls.some((call) => call.startsWith(`switch ${host.id}`)), 'node a left it alone');
  });

  it('handles an expiry once, though both gateways sweep for it at the same moment', async () => {
    const expiring = await a.createUser('expiring');
    const set = await a.request('PUT', `/v1/admin/users/${expiring.id}/expiry`, {
      body: { expires_at: new Date(Date.now() + 200).toISOString() },
    });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    await new Promise((resolve) => setTimeout(resolve, 300));
    const sweep = ({ gateway }: TestGateway) =>
      sweepExpiredUsers(gateway.repositories.users, gateway.revocation, gateway.bus);
    const handled = await Promise.all([sweep(a), sweep(b)]);
    assert.equal(handled[0]! + handled[1]!, 1, `handled ${handled.join(' + ')} times`);
    const events = (await a.request('GET', `/v1/admin/events?type=user.expired&user_id=${expiring.id}`)).body;
    assert.equal(events.events.length, 1);
  });

  it('gives a node that was only slow its hosts back at its next heartbeat, and logs a silent node once', async () => {
    const host = await createHost('b');
    // What another gateway does when b's heartbeats stall longer than NODE_DEAD_SECONDS (a stalled database).
    const marked = await a.gateway.repositories.hosts.markNodeUnavailable('b', new Date().toISOString());
    assert.ok(marked.includes(host.id));
    assert.equal((await hostOf(host.id)).status, 'node_unavailable');
    await until('b to take its hosts back', async () => (await hostOf(host.id)).status === 'created');

    // A node with no hosts that goes silent is logged too, once, whichever gateways notice.
    const empty = await startTestGateway('postgres', { ...shared, NODE_NAME: 'empty' }, new MemoryRuntime(), {
      secretsFrom: a.dataDir,
    });
    await empty.listen();
    await empty.close();
    const silent = async () =>
      (await a.request('GET', '/v1/admin/events?type=node.unavailable')).body.events.filter(
        (event: { data: { node: string } }) => event.data.node === 'empty',
      );
    await until('the empty node to be logged silent', async () => (await silent()).length > 0);
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const [logged, ...again] = await silent();
    assert.deepEqual(again, [], 'once, though a and b both look every second');
    assert.deepEqual([logged.data.stopped, logged.data.hosts], [true, 0]);
  });

  it('marks the hosts of a silent node node_unavailable, refuses work on them, and gives them back when it returns', async () => {
    const host = await createHost('b');
    await ended((await a.request('POST', `/v1/admin/hosts/${host.id}/start`)).body.task_id);
    const onA = await createHost('a');
    await b.close();

    await until(
      'the host to read node_unavailable',
      async () => (await hostOf(host.id)).status === 'node_unavailable',
    );
    const nodes = (await a.request('GET', '/v1/admin/nodes')).body.nodes;
    assert.equal(nodes.find((node: { name: string }) => node.name === 'b').state, 'unavailable');
    const refused = await a.request('POST', `/v1/admin/hosts/${host.id}/stop`);
    assert.equal(refused.status, 409);
    assert.equal(refused.body.code, 'node_unavailable');
    const undeletable = await a.request('DELETE', `/v1/admin/hosts/${host.id}`);
    assert.equal(undeletable.status, 409, 'its workspace and home are on the silent node');
    assert.equal(undeletable.body.code, 'node_unavailable');
    const events = (await a.request('GET', '/v1/admin/events?type=node.unavailable')).body.events.filter(
      (event: { data: { node: string } }) => event.data.node === 'b',
    );
    assert.equal(events.length, 1, 'said once');
    assert.deepEqual([events[0].data.node, events[0].data.stopped], ['b', true]);
    assert.match(events[0].message, /^node b stopped at /);
    assert.equal((await hostOf(onA.id)).status, 'created', "node a's hosts are not touched");
    const started = await a.request('POST', `/v1/admin/hosts/${onA.id}/start`);
    assert.equal((await ended(started.body.task_id)).status, 'succeeded');

    // Node b returns (a new process under the same name, its engine still running the workspace).
    const survivor = engineB;
    engineB = new MemoryRuntime();
    engineB.hosts.set(host.id, survivor.hosts.get(host.id)!);
    b = await startB(engineB);
    await until('the host to be back', async () => (await hostOf(host.id)).status === 'running');
    const returned = (await a.request('GET', `/v1/admin/events?type=host.node_returned&host_id=${host.id}`))
      .body;
    assert.equal(returned.events.length, 1);
    const stop = await a.request('POST', `/v1/admin/hosts/${host.id}/stop`);
    assert.equal((await ended(stop.body.task_id)).status, 'succeeded');
    assert.equal(await engineB.state(host.id), 'stopped');
  });

  it('removes a node gone for good: its hosts move to a live node, stopped, and start there; back, it stops its old workspace', async () => {
    const host = await createHost('b');
    await ended((await a.request('POST', `/v1/admin/hosts/${host.id}/start`)).body.task_id);
    await b.close();
    await until(
      'the host to read node_unavailable',
      async () => (await hostOf(host.id)).status === 'node_unavailable',
    );

    const live = await a.request('DELETE', '/v1/admin/nodes/a');
    assert.equal(live.status, 409);
    assert.equal(live.body.code, 'node_live');
    assert.equal((await a.request('DELETE', '/v1/admin/nodes/nowhere')).status, 404);
    const stream = await SseClient.open(`${a.url}/v1/admin/sse?topics=nodes&token=${a.adminToken}`);
    const removed = await a.request('DELETE', '/v1/admin/nodes/b');
    assert.equal(removed.status, 204, JSON.stringify(removed.body));
    await stream.waitFor((c) => c.messages().some((m) => m.data.action === 'delete'));
    assert.deepEqual(stream.messages().at(-1)?.data, { topic: 'nodes', action: 'delete', id: 'b' });

    const names = (await a.request('GET', '/v1/admin/nodes')).body.nodes.map(
      (node: { name: string }) => node.name,
    );
    assert.ok(names.includes('a') && !names.includes('b'), names.join(', '));
    const moved = await hostOf(host.id);
    assert.deepEqual([moved.node, moved.status], ['a', 'stopped']);
    assert.match(
      moved.last_error,
      /^Its node b was removed; its workspace and home volume stayed on that machine/,
    );
    const [said] = (await a.request('GET', '/v1/admin/events?type=node.removed')).body.events;
    assert.equal(said.data.node, 'b');
    assert.ok(said.data.hosts >= 1);
    assert.equal(said.actor.username, 'admin');
    const movedEvents = (await a.request('GET', `/v1/admin/events?type=host.moved&host_id=${host.id}`)).body
      .events;
    assert.deepEqual(movedEvents[0].data, { from_node: 'b', to_node: 'a' });

    const started = await a.request('POST', `/v1/admin/hosts/${host.id}/start`);
    assert.equal((await ended(started.body.task_id)).status, 'succeeded');
    assert.equal(await engineA.state(host.id), 'running', 'a new workspace on node a');

    // The machine comes back under its old name, its engine still running the old workspace: it joins as a
    // node again and stops that workspace, which is no longer its host's.
    const survivor = engineB;
    engineB = new MemoryRuntime();
    engineB.hosts.set(host.id, survivor.hosts.get(host.id)!);
    assert.equal(await engineB.state(host.id), 'running');
    b = await startB(engineB);
    await stream.waitFor((c) => c.messages().some((m) => m.data.action === 'update' && m.data.id === 'b'));
    stream.close();
    assert.equal(await engineB.state(host.id), 'stopped');
    assert.equal(await engineA.state(host.id), 'running', 'the host itself runs on');
    const stale = (
      await a.request('GET', `/v1/admin/events?type=host.stale_workspace_stopped&host_id=${host.id}`)
    ).body.events;
    assert.deepEqual(stale[0].data, { node: 'b', placed_on: 'a' });
    const back = (await a.request('GET', '/v1/admin/nodes')).body.nodes;
    assert.deepEqual(
      back
        .map((node: { name: string; hosts: number }) => [node.name, node.hosts])
        .find(([name]: [string]) => name === 'b'),
      ['b', 0],
    );
  });

  it('a node removed while only slow notices at its next heartbeat, joins again and stops its old workspace', async () => {
    const host = await createHost('b');
    await ended((await a.request('POST', `/v1/admin/hosts/${host.id}/start`)).body.task_id);
    assert.equal(await engineB.state(host.id), 'running');
    // What a removal at another gateway does while b's heartbeats stall (a stalled database): b's row goes, its
    // host is placed on a.
    const { hosts, nodes } = a.gateway.repositories;
    assert.ok(
      await hosts.moveFromRemovedNode(host.id, 'b', 'a', 'moved by the test', new Date().toISOString()),
    );
    assert.ok(await nodes.removeSilent('b', new Date(Date.now() + 60_000).toISOString()));

    await until('b to join again', async () =>
      ((await a.request('GET', '/v1/admin/nodes')).body.nodes as { name: string }[]).some(
        (n) => n.name === 'b',
      ),
    );
    await until('its old workspace to stop', async () => (await engineB.state(host.id)) === 'stopped');
    const rejoined = (await a.request('GET', '/v1/admin/events?type=node.rejoined')).body.events;
    assert.equal(rejoined[0].data.node, 'b');
    assert.equal((await hostOf(host.id)).node, 'a', 'the host stays where it was placed');
  });
});
