/**
 * Issue 19, for real: three gateway processes (the built dist, each its own DATA_DIR, NODE_NAME, ports and internal
 * channel) on one PostgreSQL database and the one Docker engine, with hosts in the network lab. What an operator
 * and users would check: hosts spread over the nodes, each in its own node's containers; tasks asked anywhere run
 * on the host's node; SSH (OpenSSH) and the desktop through any replica (another node's host through that node's
 * channel); live streams carried across replicas and resumed at another; and a node killed with `kill -9`: its
 * hosts read `node_unavailable` at the others (API, events, streams) while theirs keep working, and come back as
 * they were when it is started again on the same DATA_DIR.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { needs } from '../../../../test/support/needs.js';
import { Cluster, type ClusterHost } from '../helpers/cluster.js';
import { eventually, GATEWAY_MAIN } from '../helpers/gateway-process.js';
import { type LiveSession, openLiveSession, sshWithPassword, until } from '../helpers/openssh.js';
import { SseClient } from '../helpers/sse-client.js';

const LOOP = 'i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 0.2; done';
const ticks = (session: LiveSession) => session.lines.filter((line) => /^tick \d+$/.test(line)).length;

describe('three gateway nodes on one database and one engine', {
  skip:
    needs('root', 'lab', 'docker', 'postgres', 'ssh', 'sshpass') ||
    (!existsSync(GATEWAY_MAIN) && 'npm run build makes apps/gateway/dist/main.js'),
  timeout: 900_000,
}, () => {
  const cluster = new Cluster({ heartbeatSeconds: 1, deadSeconds: 3 });
  /** One host per node, by node name. */
  const hosts = new Map<string, ClusterHost>();
  const on = (node: string) => hosts.get(node)!;
  /** Live sessions (a loop printing a counter), by name: `<host's node> via <replica>`. */
  const sessions = new Map<string, LiveSession>();
  const openSession = async (owner: string, through: string) => {
    const host = on(owner);
    const live = openLiveSession(cluster.node(through).sshPort, host.sshPass, [
      `${host.login}@127.0.0.1`,
      LOOP,
    ]);
    sessions.set(`${owner} via ${through}`, live);
    await until(`the session to ${owner}'s host through ${through} to print`, () => ticks(live) >= 3, 30_000);
    return live;
  };
  /** A start of n2's host asked right after n2 was killed. */
  let earlyTask = '';
  /** Streams open at n1 and n3 through n2's outage. */
  let returnStreams: SseClient[] = [];
  const streams: SseClient[] = [];
  /** A live stream at `node`: the admin's, or a host user's (`as`). */
  const stream = async (node: string, as?: ClusterHost, headers: Record<string, string> = {}) => {
    const scope = as ? `user/sse?token=${as.token}` : `admin/sse?topics=hosts,tasks&token=${cluster.token}`;
    const client = await SseClient.open(`${cluster.node(node).url}/v1/${scope}`, headers);
    streams.push(client);
    assert.equal(client.status, 200, client.body);
    return client;
  };
  /** Waits (bounded) until a stream carried a message about `id` that `match` accepts. */
  const carried = (client: SseClient, id: string, match: (payload: any) => boolean, ms = 20_000) =>
    client.waitFor((c) => c.messages().some((m) => m.data.id === id && match(m.data.payload ?? {})), ms);

  /** A command over SSH through `node`'s proxy to `host`, as its user logs in (password, OpenSSH). */
  const ssh = (node: string, host: ClusterHost, command: string) =>
    sshWithPassword(cluster.node(node).sshPort, host.sshPass, [`${host.login}@127.0.0.1`, command], 60_000);

  before(async () => {
    await cluster.start();
  });

  after(async () => {
    for (const client of streams) client.close();
    for (const live of sessions.values()) live.child.kill('SIGKILL');
    await cluster.close();
  });

  it('every node registers, and every replica lists the three up, each with the images', async () => {
    for (const node of cluster.nodes) {
      // Each node reports its images once its first check ran (placement prefers nodes that have them).
      const listed = await eventually(
        `the three nodes up with their images at ${node.name}`,
        async () => {
          const answer = await cluster.api(node.name, 'GET', '/v1/admin/nodes');
          return answer.body.nodes?.every((n: { images_ready: boolean }) => n.images_ready) && answer;
        },
        60_000,
      );
      assert.equal(listed.status, 200, JSON.stringify(listed.body));
      assert.deepEqual(
        listed.body.nodes.map((n: { name: string; state: string; internal_address: string }) => [
          n.name,
          n.state,
          n.internal_address,
        ]),
        cluster.nodes.map((n) => [n.name, 'up', `127.0.0.1:${n.internalPort}`]),
      );
    }
  });

  it('hosts made at one replica are spread over the nodes, each in its own node’s containers', async () => {
    for (const index of [1, 2, 3]) {
      const host = await cluster.createHost('n1', `cluster${index}`);
      assert.ok(!hosts.has(host.node), `two hosts went to ${host.node}`);
      hosts.set(host.node, host);
    }
    assert.deepEqual([...hosts.keys()].sort(), ['n1', 'n2', 'n3']);
    // Every replica reads the same placement.
    for (const node of cluster.nodes)
      for (const [name, host] of hosts) assert.equal((await cluster.host(node.name, host.id)).node, name);

    // The three started at once, all asked at n1: each runs on its host's node.
    const tasks = await Promise.all([...hosts].map(([, host]) => cluster.task('n1', host.id, 'start')));
    for (const [index, [name]] of [...hosts].entries()) {
      assert.equal(tasks[index].status, 'succeeded', JSON.stringify(tasks[index].error));
      assert.equal(tasks[index].node, name);
    }
    for (const [name, host] of hosts) {
      for (const node of cluster.nodes)
        assert.equal((await cluster.host(node.name, host.id)).status, 'running');
      assert.deepEqual(await cluster.containerOwner(host.id), { node: name, containers: 2, running: 2 });
    }
  });

  it('SSH with OpenSSH reaches every host through its node, and each workspace keeps a file', async () => {
    for (const [name, host] of hosts) {
      const wrote = await ssh(name, host, `echo kept-by-${name} > ~/cluster-marker && cat ~/cluster-marker`);
      assert.equal(wrote.code, 0, wrote.stderr);
      assert.equal(wrote.stdout.trim(), `kept-by-${name}`);
    }
  });

  it('SSH and the desktop reach each host through every replica, not only its own', async () => {
    for (const [owner, host] of hosts) {
      for (const node of cluster.others(owner)) {
        const answered = await ssh(node.name, host, 'cat ~/cluster-marker');
        assert.equal(answered.code, 0, `${host.login} through ${node.name}: ${answered.stderr}`);
        assert.equal(answered.stdout.trim(), `kept-by-${owner}`);
      }
      // The desktop comes up with the host; a user opening it right away may wait a moment (bounded).
      const through = cluster.others(owner)[0]!.name;
      const screen = await eventually(
        `the desktop of ${owner}'s host through ${through}`,
        () => cluster.desktop(through, host),
        60_000,
      );
      assert.ok(screen.width > 0 && screen.height > 0, JSON.stringify(screen));
    }
  });

  it('a task asked at one replica runs on the host’s node, in its containers', async () => {
    const host = on('n3');
    const stopped = await cluster.task('n1', host.id, 'stop');
    assert.deepEqual([stopped.status, stopped.node], ['succeeded', 'n3'], JSON.stringify(stopped.error));
    for (const node of cluster.nodes)
      assert.equal((await cluster.host(node.name, host.id)).status, 'stopped');
    assert.deepEqual(await cluster.containerOwner(host.id), { node: 'n3', containers: 2, running: 0 });
    const refused = await ssh('n2', host, 'true');
    assert.equal(refused.code, 255, refused.stderr);
    assert.match(refused.stderr, /is stopped/);

    const started = await cluster.task('n2', host.id, 'start');
    assert.deepEqual([started.status, started.node], ['succeeded', 'n3'], JSON.stringify(started.error));
    assert.deepEqual(await cluster.containerOwner(host.id), { node: 'n3', containers: 2, running: 2 });
    const answered = await ssh('n1', host, 'cat ~/cluster-marker');
    assert.equal(answered.code, 0, answered.stderr);
    assert.equal(answered.stdout.trim(), 'kept-by-n3');
  });

  it('a live stream at one replica carries what another does, and resumes at a third', async () => {
    const admin = await stream('n3');
    const owner = await stream('n2', on('n1'));
    const first = await cluster.task('n1', on('n1').id, 'start');
    assert.equal(first.message, 'already running');
    for (const client of [admin, owner])
      await carried(client, first.id, (task) => task.status === 'succeeded');
    const lastId = admin.messages().at(-1)!.id!;
    admin.close();

    // What happened while the client was away is sent where it comes back, from the id it last saw.
    const missed = await cluster.task('n1', on('n1').id, 'start');
    const resumed = await stream('n2', undefined, { 'last-event-id': lastId });
    await carried(resumed, missed.id, (task) => task.status === 'succeeded');
    assert.ok(
      resumed.messages().every((m) => Number(m.id) > Number(lastId)),
      'nothing already seen is sent again',
    );
  });

  it('kill -9 of n2: its host reads node_unavailable at the others, theirs keep working', async () => {
    // Live sessions before the kill: to n1's host through n1 and through n3 (n1's channel), to n3's through n1
    // (n3's channel), and to n2's host through n3, which only n2's channel carries.
    for (const [owner, through] of [
      ['n1', 'n1'],
      ['n1', 'n3'],
      ['n3', 'n1'],
      ['n2', 'n3'],
    ] as const)
      await openSession(owner, through);
    const containersBefore = await cluster.containerOwner(on('n2').id);

    // Streams at the live replicas: the admin's, and the user of n2's host's.
    const adminAtN1 = await stream('n1');
    const userAtN3 = await stream('n3', on('n2'));
    const killed = Date.now();
    await cluster.kill9('n2');
    // Asked before anyone can know n2 is gone: queued for n2, and done when it returns (checked below).
    const early = await cluster.api('n1', 'POST', `/v1/admin/hosts/${on('n2').id}/start`);
    assert.equal(early.status, 202, JSON.stringify(early.body));
    earlyTask = early.body.task_id;
    for (const at of ['n1', 'n3']) {
      await eventually(
        `n2's host to read node_unavailable at ${at}`,
        async () => (await cluster.host(at, on('n2').id)).status === 'node_unavailable',
        (cluster.deadSeconds + 10 * cluster.heartbeatSeconds) * 1000,
      );
    }
    const seenAfter = Date.now() - killed;
    // Not before NODE_DEAD_SECONDS: the last heartbeat was at most one interval before the kill.
    assert.ok(
      seenAfter >= (cluster.deadSeconds - cluster.heartbeatSeconds) * 1000,
      `marked ${seenAfter} ms after the kill, NODE_DEAD_SECONDS=${cluster.deadSeconds}`,
    );

    for (const at of ['n1', 'n3']) {
      const nodes = (await cluster.api(at, 'GET', '/v1/admin/nodes')).body.nodes as Array<{
        name: string;
        state: string;
      }>;
      assert.deepEqual(
        nodes.map((n) => [n.name, n.state]),
        [
          ['n1', 'up'],
          ['n2', 'unavailable'],
          ['n3', 'up'],
        ],
      );
      const [hostEvent] = await cluster.events(at, 'host.node_unavailable', on('n2').id);
      assert.equal(hostEvent?.data.node, 'n2');
      const [nodeEvent] = await cluster.events(at, 'node.unavailable');
      assert.deepEqual([nodeEvent?.data.node, nodeEvent?.data.hosts], ['n2', 1]);
      // The others' hosts are as they were, and so is the rest of the API.
      for (const name of ['n1', 'n3']) assert.equal((await cluster.host(at, on(name).id)).status, 'running');
      for (const route of ['/v1/admin/hosts', '/v1/admin/users', '/v1/admin/egress-ips', '/v1/admin/tasks'])
        assert.equal((await cluster.api(at, 'GET', route)).status, 200, `${route} at ${at}`);
    }
    // The engine still runs n2's containers: nobody else touched them.
    assert.deepEqual(await cluster.containerOwner(on('n2').id), containersBefore);

    // The other nodes' hosts still answer over SSH, and the session opened before the kill still prints.
    for (const [through, owner] of [
      ['n1', 'n1'],
      ['n3', 'n3'],
      ['n3', 'n1'],
      ['n1', 'n3'],
    ] as const) {
      const answered = await ssh(through, on(owner), 'cat ~/cluster-marker');
      assert.equal(answered.code, 0, `${owner}'s host through ${through}: ${answered.stderr}`);
      assert.equal(answered.stdout.trim(), `kept-by-${owner}`);
    }
    // The sessions that did not go through n2 go on printing; the one n2 relayed ended with it.
    for (const [name, live] of sessions) {
      if (name === 'n2 via n3') continue;
      const printed = ticks(live);
      await until(`the session ${name} to go on printing`, () => ticks(live) >= printed + 5, 20_000);
    }
    const relayed = sessions.get('n2 via n3')!;
    assert.equal(await relayed.exited, 255, relayed.stderr());

    // n2's host is refused through a live replica, saying why (and not offering a start that cannot help).
    const refused = await ssh('n1', on('n2'), 'true');
    assert.equal(refused.code, 255, refused.stderr);
    assert.match(
      refused.stderr,
      new RegExp(`host ${on('n2').shortId} is on node n2, which has stopped answering`),
    );
    assert.doesNotMatch(refused.stderr, /start it/i);
    await assert.rejects(cluster.desktop('n3', on('n2')), /node n2, which has stopped answering/);

    // Both streams were told, whichever replica noticed.
    for (const client of [adminAtN1, userAtN3])
      await carried(client, on('n2').id, (host) => host.status === 'node_unavailable');
    returnStreams = [adminAtN1, userAtN3];

    const waiting = await cluster.api('n3', 'GET', `/v1/admin/tasks/${earlyTask}`);
    assert.deepEqual([waiting.body.status, waiting.body.node], ['pending', 'n2']);
    // Nothing can be done to n2's host but wait: no other node takes its work.
    for (const action of ['start', 'stop', 'rebuild']) {
      const asked = await cluster.api('n3', 'POST', `/v1/admin/hosts/${on('n2').id}/${action}`);
      assert.equal(asked.status, 409, `${action}: ${JSON.stringify(asked.body)}`);
      assert.equal(asked.body.code, 'node_unavailable');
    }

    // New hosts go to the live nodes only; pinning one to n2 is refused with the live ones named.
    const placed = await cluster.createHost('n3', 'cluster4');
    assert.ok(['n1', 'n3'].includes(placed.node), `placed on ${placed.node}`);
    const pinned = await cluster.api('n3', 'POST', '/v1/admin/hosts', { user_id: placed.userId, node: 'n2' });
    assert.equal(pinned.status, 409, JSON.stringify(pinned.body));
    assert.equal(pinned.body.code, 'node_unavailable');
  });

  it('n2 started again on its DATA_DIR: its host is back as it was, SSH works again, nothing lost', async () => {
    const before = {
      hosts: (await cluster.api('n1', 'GET', '/v1/admin/hosts')).body.hosts.length,
      users: (await cluster.api('n1', 'GET', '/v1/admin/users')).body.users.length,
      containers: await cluster.containerOwner(on('n2').id),
    };
    // A task running on n3 while n2 starts again: n2's start-up fails only its own unfinished tasks.
    const rebuild = await cluster.api('n1', 'POST', `/v1/admin/hosts/${on('n3').id}/rebuild`);
    assert.equal(rebuild.status, 202, JSON.stringify(rebuild.body));
    await eventually('the rebuild to run on n3', async () => {
      const task = await cluster.api('n1', 'GET', `/v1/admin/tasks/${rebuild.body.task_id}`);
      return task.body.status !== 'pending';
    });
    await cluster.restart('n2');
    for (const node of cluster.nodes) {
      await eventually(
        `n2's host to read running at ${node.name}`,
        async () => (await cluster.host(node.name, on('n2').id)).status === 'running',
        30_000,
      );
      const nodes = (await cluster.api(node.name, 'GET', '/v1/admin/nodes')).body.nodes as Array<{
        name: string;
        state: string;
      }>;
      assert.ok(
        nodes.every((n) => n.state === 'up'),
        JSON.stringify(nodes),
      );
      const [returned] = await cluster.events(node.name, 'host.node_returned', on('n2').id);
      assert.equal(returned?.data.node, 'n2');
    }
    // The streams open through the outage are told by n2 itself that its host is back.
    for (const client of returnStreams) {
      const before = client.messages().findIndex((m) => m.data.payload?.status === 'node_unavailable');
      await client.waitFor((c) =>
        c
          .messages()
          .slice(before + 1)
          .some((m) => m.data.id === on('n2').id && m.data.payload?.status === 'running'),
      );
    }
    // The same containers, never recreated: what the user had in the workspace is still there.
    assert.deepEqual(await cluster.containerOwner(on('n2').id), before.containers);
    const answered = await eventually('SSH to n2’s host through n2', async () => {
      const result = await ssh('n2', on('n2'), 'cat ~/cluster-marker');
      return result.code === 0 && result;
    });
    assert.equal(answered.stdout.trim(), 'kept-by-n2');
    const throughN1 = await ssh('n1', on('n2'), 'cat ~/cluster-marker');
    assert.equal(throughN1.code, 0, throughN1.stderr);
    assert.equal(throughN1.stdout.trim(), 'kept-by-n2');
    const screen = await cluster.desktop('n3', on('n2'));
    assert.ok(screen.width > 0, JSON.stringify(screen));
    assert.equal((await cluster.api('n2', 'GET', '/v1/admin/hosts')).body.hosts.length, before.hosts);
    assert.equal((await cluster.api('n2', 'GET', '/v1/admin/users')).body.users.length, before.users);
    const done = await cluster.taskEnd('n3', earlyTask, 30_000);
    assert.deepEqual([done.status, done.node, done.message], ['succeeded', 'n2', 'already running']);
    const rebuilt = await cluster.taskEnd('n2', rebuild.body.task_id);
    assert.deepEqual([rebuilt.status, rebuilt.node], ['succeeded', 'n3'], JSON.stringify(rebuilt.error));
    assert.deepEqual(await cluster.events('n2', 'task.interrupted'), []);
    for (const name of ['n1', 'n3']) assert.equal((await cluster.host('n2', on(name).id)).status, 'running');

    // One node went away in all this: no other was ever reported silent.
    const silent = await cluster.events('n3', 'node.unavailable');
    assert.deepEqual(
      silent.map((event) => event.data.node),
      ['n2'],
    );
    // The sessions to n1's host (directly and through n3) lived through all of it (the rebuild ended n3's).
    for (const name of ['n1 via n1', 'n1 via n3']) {
      const live = sessions.get(name)!;
      assert.equal(live.child.exitCode, null, `${name}: ${live.stderr()}`);
    }
  });
});
