import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import ssh2 from 'ssh2';
import { needs } from '../../../../test/support/needs.js';
import { generateEd25519 } from '../../src/domain/users/ssh-public-key.js';
import type { WorkspaceActivityProbe } from '../../src/runtime/workspace-activity.js';
import { freePort } from '../helpers/lab-gateway.js';
import { MemoryRuntime } from '../helpers/memory-runtime.js';
import { type LiveSession, openLiveSession, until } from '../helpers/openssh.js';
import { createPostgresDatabase, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/** A workspace that shows no activity: only the lifetime decides, and tmux has no clients to tell. */
const quietProbe: WorkspaceActivityProbe = {
  sample: async () => ({ cpuSeconds: 0, networkBytes: 0, pid: 1 }),
  terminalOutputAt: async () => null,
  tellTerminals: async () => {},
};

/** A stand-in for a workspace's sshd: takes the gateway's key login and keeps an interactive shell open. */
function fakeWorkspaceSshd(): ssh2.Server {
  return new ssh2.Server({ hostKeys: [generateEd25519('test host').privateKey] }, (connection) => {
    connection.on('authentication', (ctx) => (ctx.method === 'publickey' ? ctx.accept() : ctx.reject()));
    connection.on('session', (accept) =>
      accept()
        .on('pty', (acceptPty) => acceptPty?.())
        .on('shell', (acceptShell) => acceptShell().write('workspace shell on node a\r\n')),
    );
    connection.on('error', () => {});
  });
}

/**
 * Two gateways on one PostgreSQL database, nodes `a` and `b`, a host on `a`: the lifecycle round that warns of its
 * coming stop runs at a, and a real OpenSSH session attached through b sees the line in its terminal.
 */
describe('a stop warning reaches sessions at every gateway', {
  skip: needs('postgres', 'ssh', 'sshpass'),
  timeout: 60_000,
}, () => {
  let database: Awaited<ReturnType<typeof createPostgresDatabase>>;
  const runtimeA = new MemoryRuntime();
  const sshd = fakeWorkspaceSshd();
  let a: TestGateway;
  let b: TestGateway;
  let session: LiveSession | null = null;

  before(async () => {
    database = await createPostgresDatabase();
    await new Promise<void>((resolve) => sshd.listen(0, '127.0.0.1', resolve));
    runtimeA.sshEndpoint = { host: '127.0.0.1', port: (sshd.address() as AddressInfo).port };
    const shared = {
      DATABASE_URL: database.url,
      ADMIN_JWT_SECRET: randomBytes(36).toString('base64'),
      // Any stop within ten minutes is warned of at once.
      HOST_STOP_WARNING_SECONDS: '600',
    };
    a = await startTestGateway(
      'postgres',
      { ...shared, NODE_NAME: 'a', INTERNAL_BIND: `127.0.0.1:${await freePort()}` },
      runtimeA,
      { activityProbe: quietProbe },
    );
    b = await startTestGateway(
      'postgres',
      { ...shared, NODE_NAME: 'b', INTERNAL_BIND: `127.0.0.1:${await freePort()}` },
      new MemoryRuntime(),
      { secretsFrom: a.dataDir, activityProbe: quietProbe },
    );
    await a.listen();
    await b.listen();
  });
  after(async () => {
    session?.child.kill();
    await b?.close();
    await a?.close();
    sshd.close();
    await database?.drop();
  });

  it('a round at the host’s node warns of a lifetime stop, and the terminal attached at b shows it', async () => {
    const user = await a.createUser('warned');
    const host = await a.createHost(user.id, await a.createEgressIp('198.51.100.62'), { node: 'a' });
    const set = await a.request('PUT', `/v1/admin/hosts/${host.id}/lifecycle-policy`, {
      body: { idle_timeout_seconds: null, max_lifetime_seconds: 300, schedule: null },
    });
    assert.equal(set.status, 200, JSON.stringify(set.body));

    session = openLiveSession(b.gateway.ssh.port, user.sshPass, ['-tt', `warned+${host.short_id}@127.0.0.1`]);
    await until('the shell at b', () => session!.lines.some((line) => line.includes('workspace shell')));

    await a.gateway.lifecycleScheduler.round();
    const [warning] = (await a.request('GET', `/v1/admin/events?host_id=${host.id}&type=host.stop_warning`))
      .body.events;
    assert.ok(warning, 'the round at a warned');
    assert.equal(warning.data.terminals_told, 0, 'no terminal of the host is attached at a');
    await until('the line in the terminal attached at b', () => session!.stderr().includes('stops in about'));
    assert.match(session.stderr(), new RegExp(`host ${host.short_id} stops in about \\d+ min`));
    assert.match(session.stderr(), /lifetime: it ran for its maximum lifetime/);
    assert.match(session.stderr(), /`ccp extend`/);
  });

  it('what someone types in the terminal attached at b is the activity the host’s node reads', async () => {
    const [host] = (await a.request('GET', '/v1/admin/hosts')).body.hosts;
    const typedAt = Date.now();
    session!.child.stdin.write('echo typed at b\n');
    await until('the keys to pass through b', async () => {
      await b.gateway.sessionInput.record();
      const { lifecycle } = (await a.request('GET', `/v1/admin/hosts/${host.id}`)).body;
      return (
        lifecycle.last_activity_signal === 'session' && Date.parse(lifecycle.last_activity_at) >= typedAt
      );
    });
  });
});
