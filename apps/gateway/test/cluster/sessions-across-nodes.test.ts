import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import ssh2 from 'ssh2';
import WebSocket from 'ws';
import { needs } from '../../../../test/support/needs.js';
import { generateEd25519 } from '../../src/domain/users/ssh-public-key.js';
import { FakeDesktop, openStream } from '../helpers/fake-desktop.js';
import { freePort } from '../helpers/lab-gateway.js';
import { MemoryRuntime } from '../helpers/memory-runtime.js';
import { until } from '../helpers/openssh.js';
import { execAndEnd } from '../helpers/ssh2-exec.js';
import { createPostgresDatabase, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/**
 * A stand-in for a workspace's sshd: takes the gateway's key login and answers any command with where it runs.
 * (The real OpenSSH path through a replica is tested with three gateway processes elsewhere.)
 */
function fakeWorkspaceSshd(): ssh2.Server {
  return new ssh2.Server({ hostKeys: [generateEd25519('test host').privateKey] }, (connection) => {
    connection.on('authentication', (ctx) => (ctx.method === 'publickey' ? ctx.accept() : ctx.reject()));
    connection.on('session', (accept) =>
      accept()
        // The browser terminal asks for a PTY before its command.
        .on('pty', (acceptPty) => acceptPty?.())
        .on('exec', (acceptExec, _reject, info) => {
          const stream = acceptExec();
          stream.write(`workspace on node a ran: ${info.command}\n`);
          stream.exit(0);
          stream.end();
        }),
    );
    connection.on('error', () => {});
  });
}

/** Logs in to a gateway's SSH proxy as `login` and runs `command`; the output, or the refusal's banner. */
function sshRun(port: number, login: string, password: string, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const client = new ssh2.Client();
    let banner = '';
    client.on('banner', (text) => {
      banner += text;
    });
    client.on('error', () => resolve(banner));
    client.on('ready', () => execAndEnd(client, command).then(resolve, reject));
    client.connect({ host: '127.0.0.1', port, username: login, password, readyTimeout: 10_000 });
  });
}

/** Asks for a folder mount on a gateway's SSH proxy; the status line the gateway answers on stderr. */
function askMount(port: number, login: string, password: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const client = new ssh2.Client();
    client.on('error', reject);
    client.on('ready', () =>
      client.subsys('ccp-mount@cloud-cli-proxy', (error, channel) => {
        if (error) return reject(error);
        let said = '';
        channel.stderr.on('data', (chunk: Buffer) => {
          said += chunk.toString();
          if (!said.includes('\n')) return;
          client.end();
          resolve(said);
        });
        channel.write(`${JSON.stringify({ path: '/home/x/project', layout: 'link' })}\n`);
      }),
    );
    client.connect({ host: '127.0.0.1', port, username: login, password, readyTimeout: 10_000 });
  });
}

/**
 * Two gateways on one PostgreSQL database, nodes `a` and `b`: a host placed on `a` is served at `b` (its SSH
 * sessions, desktop stream and desktop controls) through a's internal channel, and b's own engine is never
 * asked for it.
 */
describe('sessions to a host of another node', { skip: needs('postgres'), timeout: 60_000 }, () => {
  let database: Awaited<ReturnType<typeof createPostgresDatabase>>;
  const runtimeA = new MemoryRuntime();
  const runtimeB = new MemoryRuntime();
  const desktop = new FakeDesktop(() =>
    [...runtimeA.hosts.values()].map((host) => host.spec.desktopPassword),
  );
  const sshd = fakeWorkspaceSshd();
  let a: TestGateway;
  let b: TestGateway;
  let aClosed = false;
  let user: { id: string; token: string; password: string };
  let host: { id: string; short_id: string };

  /** Hosts b's engine was asked where to reach (lifecycle calls are in `runtimeB.calls`). */
  const endpointsAskedOfB: string[] = [];
  const endpointsOfB = runtimeB.endpoints.bind(runtimeB);
  runtimeB.endpoints = async (hostId) => {
    endpointsAskedOfB.push(hostId);
    return endpointsOfB(hostId);
  };

  before(async () => {
    database = await createPostgresDatabase();
    runtimeA.desktopEndpoint = { host: '127.0.0.1', port: await desktop.listen() };
    await new Promise<void>((resolve) => sshd.listen(0, '127.0.0.1', resolve));
    runtimeA.sshEndpoint = { host: '127.0.0.1', port: (sshd.address() as AddressInfo).port };
    const shared = { DATABASE_URL: database.url, ADMIN_JWT_SECRET: randomBytes(36).toString('base64') };
    a = await startTestGateway(
      'postgres',
      { ...shared, NODE_NAME: 'a', INTERNAL_BIND: `127.0.0.1:${await freePort()}` },
      runtimeA,
    );
    b = await startTestGateway(
      'postgres',
      { ...shared, NODE_NAME: 'b', INTERNAL_BIND: `127.0.0.1:${await freePort()}` },
      runtimeB,
      { secretsFrom: a.dataDir },
    );
    await a.listen();
    await b.listen();

    user = await a.createUser('roams');
    host = await a.createHost(user.id, await a.createEgressIp('198.51.100.61'), { node: 'a' });
    assert.equal((await b.request('GET', `/v1/admin/hosts/${host.id}`)).body.status, 'running');
  });
  after(async () => {
    if (!aClosed) await a?.close();
    await b?.close();
    desktop.close();
    sshd.close();
    await database?.drop();
  });

  /** b's engine must never be asked about a's host: not its endpoints, not a command. */
  const bNeverAsked = () => {
    assert.deepEqual(endpointsAskedOfB, []);
    assert.deepEqual(
      runtimeB.calls.filter((call) => call.includes(host.id)),
      [],
    );
  };

  it('an SSH session opened at b runs in the workspace on a', async () => {
    const out = await sshRun(b.gateway.ssh.port, `roams+${host.short_id}`, user.password, 'whoami');
    assert.equal(out, 'workspace on node a ran: whoami\n');
    bNeverAsked();
  });

  it('a desktop stream opened at b reaches the desktop on a, both ways', async () => {
    const before = desktop.streams.length;
    const opened = await openStream(
      `${b.url.replace('http', 'ws')}/v1/user/hosts/${host.id}/vnc/websockify`,
      {
        authorization: `Bearer ${user.token}`,
      },
    );
    assert.ok('socket' in opened, JSON.stringify(opened));
    try {
      assert.equal(opened.banner, 'RFB 003.008\n');
      assert.equal(desktop.streams.length, before + 1, 'the desktop on a took the gateway’s password');
      const echoed = new Promise<string>((resolve) =>
        opened.socket.once('message', (data: Buffer) => resolve(data.toString())),
      );
      opened.socket.send(Buffer.from('through the channel'));
      assert.equal(await echoed, 'through the channel');
    } finally {
      opened.socket.close();
    }
    bNeverAsked();
  });

  it('desktop status and restart asked at b run on a', async () => {
    const status = await b.request('GET', `/v1/user/hosts/${host.id}/vnc/status`, { token: user.token });
    assert.equal(status.status, 200, JSON.stringify(status.body));
    assert.equal(status.body.status, 'running');
    runtimeA.desktops.set(host.id, 'stopped');
    const restarted = await b.request('POST', `/v1/user/hosts/${host.id}/vnc/restart`, { token: user.token });
    assert.equal(restarted.status, 200, JSON.stringify(restarted.body));
    assert.equal(restarted.body.status, 'running');
    assert.ok(runtimeA.calls.includes(`exec ${host.id} /usr/local/sbin/ccp-desktop restart`));
    bNeverAsked();
  });

  it('a browser terminal whose ticket a issued opens at b and runs tmux in the workspace on a', async () => {
    const ticket = await a.request('POST', `/v1/user/hosts/${host.id}/terminal/ticket`, {
      token: user.token,
      body: { session: 'roaming' },
    });
    assert.equal(ticket.status, 200, JSON.stringify(ticket.body));
    const path = new URL(ticket.body.url).pathname + new URL(ticket.body.url).search;
    const socket = new WebSocket(`${b.url.replace('http', 'ws')}${path}`);
    const output: Buffer[] = [];
    socket.on('message', (data: Buffer) => output.push(data));
    const closed = await new Promise<{ code: number; reason: string }>((resolve, reject) => {
      socket.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
      socket.on('error', reject);
    });
    // The stand-in sshd on a answers with the command it got, then ends it: the tmux client left.
    assert.match(Buffer.concat(output).toString(), /^workspace on node a ran: cd 2>\/dev\/null\n/);
    assert.match(Buffer.concat(output).toString(), /exec tmux new-session -A -s roaming/);
    assert.deepEqual(closed, { code: 1000, reason: 'session_ended' });
    // Taken once: the same ticket at a is spent.
    const again = new WebSocket(`${a.url.replace('http', 'ws')}${path}`);
    const status = await new Promise<number | undefined>((resolve) => {
      again.on('unexpected-response', (_request, response) => resolve(response.statusCode));
      again.on('open', () => resolve(101));
      again.on('error', () => {});
    });
    again.terminate();
    assert.equal(status, 401);
    bNeverAsked();
  });

  it('a folder mount asked at b is refused with the node that can serve it', async () => {
    const said = await askMount(b.gateway.ssh.port, `roams+${host.short_id}`, user.password);
    assert.match(
      said,
      new RegExp(`^error host ${host.short_id} runs on node a, and only that node's gateway`),
    );
  });

  it('when a is gone, b says which node does not answer, for SSH and the desktop', async () => {
    await a.close();
    aClosed = true;
    // Until b's next heartbeat round marks a's hosts, b finds a silent on the channel; after, by the host's state.
    const gone = `(runs on node a, which does not answer this gateway|is on node a, which has stopped answering)`;
    const refused = await sshRun(b.gateway.ssh.port, `roams+${host.short_id}`, user.password, 'whoami');
    assert.match(refused, new RegExp(`host ${host.short_id} ${gone}`));
    const began = Date.now();
    const stream = await openStream(
      `${b.url.replace('http', 'ws')}/v1/user/hosts/${host.id}/vnc/websockify`,
      {
        authorization: `Bearer ${user.token}`,
      },
    );
    assert.ok('closed' in stream, JSON.stringify(stream));
    assert.match(stream.reason, new RegExp(`The host ${gone}`));
    assert.ok(Date.now() - began < 5_000, 'closed at once, not after the close handshake timed out');

    await until(
      "b to mark a's host node_unavailable",
      async () => (await b.request('GET', `/v1/admin/hosts/${host.id}`)).body.status === 'node_unavailable',
      20_000,
    );
    const marked = await sshRun(b.gateway.ssh.port, `roams+${host.short_id}`, user.password, 'whoami');
    assert.match(marked, new RegExp(`host ${host.short_id} is on node a, which has stopped answering`));
    bNeverAsked();
  });
});
