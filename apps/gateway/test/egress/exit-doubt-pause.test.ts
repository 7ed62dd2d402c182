/**
 * Issue 30, pause when the exit is in doubt (EGRESS_PAUSE_WHEN_IN_DOUBT=on): a real workspace whose upstream is
 * the lab's VMess inbound behind a TCP forwarder this test runs, which it points at the lab's second exit to make
 * the exit drift. The health round finds the drift, the attached session is told, the workspace is frozen (a
 * counter loop its user started stops advancing) until the forwarder points back; then the same loop runs on and
 * the session, open all along, answers again.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { labUnavailable } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { type LabGateway, type LabTenant, startLabGateway, startTenant } from '../helpers/lab-gateway.js';
import { openLiveSession, sshWithPassword, until } from '../helpers/openssh.js';

const exec = promisify(execFile);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const VMESS_PORT = 10086;

/** A TCP forwarder on the lab's root address whose target the test moves; existing connections are cut. */
class Forwarder {
  readonly server = net.createServer((client) => {
    const upstream = net.connect(VMESS_PORT, this.target);
    this.open.add(client);
    client.on('close', () => this.open.delete(client));
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end).pipe(upstream);
    upstream.on('error', end).on('close', end).pipe(client);
  });
  private readonly open = new Set<net.Socket>();

  constructor(public target: string) {}

  listen(address: string): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, address, () => resolve((this.server.address() as net.AddressInfo).port));
    });
  }

  pointAt(target: string): void {
    this.target = target;
    for (const socket of this.open) socket.destroy();
  }

  close(): void {
    for (const socket of this.open) socket.destroy();
    this.server.close();
  }
}

describe('a workspace pauses while its exit is in doubt', {
  skip: labUnavailable() || needs('ssh', 'sshpass'),
  timeout: 600_000,
}, () => {
  const username = `pause${randomBytes(3).toString('hex')}`;
  let lab: LabGateway;
  let forwarder: Forwarder;
  let tenant: LabTenant;
  /** The counter the user's loop writes, read from outside: a frozen workspace runs no command. */
  const counter = async () => {
    const { stdout } = await exec('docker', ['inspect', '-f', '{{.State.Pid}}', `ccp-ws-${tenant.hostId}`]);
    return Number((await readFile(`/proc/${stdout.trim()}/root/tmp/ccp-counter`, 'utf8')).trim());
  };

  before(async () => {
    lab = await startLabGateway({ EGRESS_PAUSE_WHEN_IN_DOUBT: 'on', EGRESS_HEALTH_SECONDS: '2' });
    const [first, second] = lab.lab.exits;
    assert.ok(first && second, 'the lab has two exits');
    forwarder = new Forwarder(first.address);
    const forwarderPort = await forwarder.listen(lab.lab.root.address);
    const egress = await lab.t.request('POST', '/v1/admin/egress-ips', {
      body: {
        label: 'forwarded vmess',
        ip_address: first.address,
        proxy_config: {
          ...first.variants['vmess-tcp'].proxyConfig,
          server: lab.lab.root.address,
          server_port: forwarderPort,
        },
      },
    });
    assert.equal(egress.status, 201, JSON.stringify(egress.body));
    tenant = await startTenant(lab, username, egress.body.id);
  });

  after(async () => {
    forwarder?.close();
    await lab?.close();
  });

  it('freezes its processes when the exit drifts, tells the session, and thaws them when the exit is back', async () => {
    const session = openLiveSession(tenant.port, tenant.sshPass, ['-tt', `${tenant.login}@127.0.0.1`]);
    try {
      session.child.stdin.write('echo $((6*7))ready\n');
      await until(
        'the session to open',
        () => session.lines.some((line) => line.includes('42ready')),
        30_000,
      );
      const started = await sshWithPassword(
        tenant.port,
        tenant.sshPass,
        [
          `${tenant.login}@127.0.0.1`,
          `tmux new-session -d -s counter 'i=0; while :; do i=$((i+1)); echo $i > /tmp/ccp-counter; sleep 0.1; done'`,
        ],
        60_000,
      );
      assert.equal(started.code, 0, started.stderr);
      await until('the counter to run', async () => (await counter().catch(() => 0)) > 5, 20_000);
      const before = await counter();
      await sleep(1000);
      assert.ok((await counter()) > before, 'the counter advances');
      assert.equal((await tenant.host()).egress.paused, null);

      forwarder.pointAt(lab.lab.exits[1]!.address);
      await until('the pause', async () => (await tenant.host()).egress.paused !== null, 90_000);
      const paused = (await tenant.host()).egress.paused;
      assert.match(paused.reason, /exit drifted/);
      assert.ok(paused.reason.includes(lab.lab.exits[1]!.address), paused.reason);
      assert.equal((await tenant.host()).status, 'running', 'paused, not stopped');
      assert.match(session.stderr(), /is paused: its exit drifted/);
      await until('the paused event', async () => (await tenant.events('host.paused')).length === 1, 10_000);
      const [event] = await tenant.events('host.paused');
      assert.ok(event.data.terminals_told >= 1, JSON.stringify(event.data));
      const frozenAt = await counter();
      await sleep(2500);
      assert.equal(await counter(), frozenAt, 'the counter does not advance while paused');

      forwarder.pointAt(lab.lab.exits[0]!.address);
      await until('the resume', async () => (await tenant.host()).egress.paused === null, 90_000);
      await until(
        'the resumed event',
        async () => (await tenant.events('host.resumed')).length === 1,
        10_000,
      );
      await sleep(1000);
      const after = await counter();
      assert.ok(after > frozenAt, `the same loop runs on (${frozenAt} then ${after})`);
      assert.ok(after < frozenAt + 200, 'from where it stopped, not started again');
      session.child.stdin.write('echo $((6*8))back\n');
      await until(
        'the session to answer again',
        () => session.lines.some((line) => line.includes('48back')),
        30_000,
      );
      assert.match(session.stderr(), /resumed: its exit is verified again/);
    } finally {
      session.child.kill();
    }
  });
});
