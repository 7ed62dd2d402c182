import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { labUnavailable } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { HOST_KEY_FILE } from '../../src/ssh/host-key.js';
import { type LabGateway, startLabGateway } from '../helpers/lab-gateway.js';
import {
  keyOnly,
  proxyOptions,
  runClient,
  sshWithKey,
  sshWithPassword,
  until,
  within,
} from '../helpers/openssh.js';
import { KeyFactory } from '../helpers/ssh-keygen.js';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const execFileP = promisify(execFile);
const skip = labUnavailable() || needs('ssh', 'sshpass', 'ssh-keygen');

async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Connects to a local port and returns what the server sends before closing (empty when refused). */
function readAll(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = new Socket();
    let text = '';
    socket.setTimeout(5_000, () => socket.destroy());
    socket.on('data', (chunk) => (text += chunk));
    socket.on('close', () => resolve(text));
    socket.on('error', () => {});
    socket.connect(port, '127.0.0.1');
  });
}

describe('the SSH proxy refusing a host that is not running', { skip: needs('ssh', 'sshpass') }, () => {
  let t: TestGateway;
  before(async () => {
    t = await startTestGateway('sqlite', {
      PUBLIC_API_URL: 'http://gw.example.test:8080',
      PUBLIC_ENTRY_URL: 'http://gw.example.test',
    });
    await t.listen();
  });
  after(() => t?.close());

  /** An OpenSSH login with the user's password: refused, so what matters is its stderr. */
  const login = (name: string, password: string) =>
    sshWithPassword(t.gateway.ssh.port, password, [`${name}@127.0.0.1`, 'true']);

  it('names the ways its owner has to start it: the portal page and the access command', async () => {
    const user = await t.createUser('stopped-owner');
    const egressIpId = await t.createEgressIp('198.51.100.77');
    const host = (
      await t.request('POST', '/v1/admin/hosts', { body: { user_id: user.id, egress_ip_id: egressIpId } })
    ).body;
    const refused = await login(`stopped-owner+${host.short_id}`, user.password);
    assert.equal(refused.code, 255, refused.stderr);
    assert.ok(
      refused.stderr.includes(
        `host ${host.short_id} is created; start it with the Start button at ` +
          `http://gw.example.test:8080/portal/hosts/${host.id}, or run its access command, which starts it and ` +
          `connects: curl -fsSL http://gw.example.test/entry/${host.short_id} | sh`,
      ),
      refused.stderr,
    );
    assert.ok(!refused.stderr.includes('dashboard'), refused.stderr);
  });

  it('tells the owner of a host without an egress IP that only an administrator can make it startable', async () => {
    const user = await t.createUser('unbound-owner');
    const host = (await t.request('POST', '/v1/admin/hosts', { body: { user_id: user.id } })).body;
    const refused = await login(`unbound-owner+${host.short_id}`, user.password);
    assert.equal(refused.code, 255, refused.stderr);
    assert.ok(
      refused.stderr.includes(
        `host ${host.short_id} has no egress IP, so it cannot start; ask your administrator to bind one`,
      ),
      refused.stderr,
    );
    assert.ok(!refused.stderr.includes('Start button'), refused.stderr);
    // The owner's own start through the API says the same; an administrator is told how to bind.
    const owner = await t.request('POST', `/v1/user/hosts/${host.id}/start`, { token: user.token });
    assert.equal(owner.status, 409, JSON.stringify(owner.body));
    assert.match(owner.body.error, /ask your administrator to bind one/);
    const admin = await t.request('POST', `/v1/admin/hosts/${host.id}/start`);
    assert.match(admin.body.error, /bind one first \(POST \/v1\/admin\/bindings\)/);
  });

  it('says who stopped it: an administrator, or the owner themselves', async () => {
    const user = await t.createUser('stopped-by');
    const egress = await t.request('POST', '/v1/admin/egress-ips', {
      body: {
        label: 'exit',
        ip_address: '198.51.100.41',
        proxy_config: { type: 'socks', server: '198.51.100.41', server_port: 1080 },
      },
    });
    const host = (
      await t.request('POST', '/v1/admin/hosts', { body: { user_id: user.id, egress_ip_id: egress.body.id } })
    ).body;
    const startThenStop = async (token?: string) => {
      const scope = token ? 'user' : 'admin';
      const options = token ? { token } : {};
      assert.equal((await t.request('POST', `/v1/${scope}/hosts/${host.id}/start`, options)).status, 202);
      await t.gateway.tasks.idle();
      const stop = await t.request('POST', `/v1/${scope}/hosts/${host.id}/stop`, options);
      assert.equal(stop.status, 202);
      await t.gateway.tasks.idle();
      return (await t.request('GET', `/v1/admin/tasks/${stop.body.task_id}`)).body.created_at as string;
    };

    const byAdmin = await startThenStop();
    const refused = await login(`stopped-by+${host.short_id}`, user.password);
    assert.equal(refused.code, 255, refused.stderr);
    assert.ok(
      refused.stderr.includes(
        `host ${host.short_id} is stopped (stopped by the administrator admin at ${byAdmin}); start it`,
      ),
      refused.stderr,
    );

    const byOwner = await startThenStop(user.token);
    const own = await login(`stopped-by+${host.short_id}`, user.password);
    assert.ok(
      own.stderr.includes(`is stopped (stopped by you (stopped-by) at ${byOwner}); start it`),
      own.stderr,
    );
  });
});

describe('the SSH proxy, with OpenSSH clients, against a real workspace', { skip, timeout: 900_000 }, () => {
  const suffix = randomBytes(3).toString('hex');
  const username = `sp${suffix}`;
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-ssh-proxy-'));
  const keys = new KeyFactory();
  const agents: number[] = [];
  const servers: Server[] = [];
  let lab: LabGateway;
  let t: TestGateway;
  let port: number;
  let user: { id: string; sshPass: string; password: string };
  let host: { id: string; short_id: string };
  let keyFile: string;
  let login: string;

  const sshPassword = (args: string[], options: { password?: string; timeoutMs?: number } = {}) =>
    sshWithPassword(port, options.password ?? user.sshPass, args, options.timeoutMs);
  const sshKey = (args: string[], env: Record<string, string> = {}) =>
    sshWithKey(port, keyFile, args, { env });
  const events = async (type: string) =>
    (await t.request('GET', `/v1/admin/events?type=${type}&user_id=${user.id}&limit=500`)).body.events as {
      data: Record<string, unknown>;
    }[];

  before(async () => {
    lab = await startLabGateway();
    t = lab.t;
    port = t.gateway.ssh.port;
    user = await t.createUser(username);
    host = await lab.createHost(user.id);
    login = `${username}+${host.short_id}`;

    const key = keys.generate('ed25519');
    keyFile = path.join(work, 'id_ed25519');
    writeFileSync(keyFile, key.privateKey, { mode: 0o600 });
    const added = await t.request('POST', `/v1/admin/users/${user.id}/ssh-keys`, {
      body: { public_key: key.publicKey },
    });
    assert.equal(added.status, 201, JSON.stringify(added.body));
    await within(300_000, 'the workspace start', lab.startHost(host.id));
  });

  after(async () => {
    for (const pid of agents) {
      try {
        process.kill(pid);
      } catch {}
    }
    for (const server of servers) server.close();
    await lab?.close();
    keys.cleanup();
    rmSync(work, { recursive: true, force: true });
  });

  it('keeps one host key in DATA_DIR, private to the gateway', () => {
    assert.equal(statSync(path.join(t.dataDir, HOST_KEY_FILE)).mode & 0o777, 0o600);
  });

  it('logs in with the SSH password, runs a command and returns its exit status', async () => {
    const result = await sshPassword([`${login}@127.0.0.1`, 'id -un; echo to-stderr >&2; exit 7']);
    assert.equal(result.code, 7, result.stderr);
    assert.equal(result.stdout.trim(), username);
    assert.match(result.stderr, /to-stderr/);

    await until('the session-closed event', async () => (await events('ssh.session.closed')).length > 0);
    const [closed] = await events('ssh.session.closed');
    assert.equal(closed!.data.username, username);
    assert.equal(closed!.data.short_id, host.short_id);
    assert.equal(closed!.data.client_address, '127.0.0.1');
    assert.ok((closed!.data.bytes_out as number) > username.length);
    assert.equal(typeof closed!.data.duration_ms, 'number');
    assert.equal((await events('ssh.session.opened')).length, 1);
  });

  it('takes the login password as well as the SSH password (one password for every way in)', async () => {
    const result = await sshPassword([`${login}@127.0.0.1`, 'id -un'], { password: user.password });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout.trim(), username);
  });

  it("PuTTY's plink logs in and runs a command (the proxy's algorithms leave PuTTY a match)", async (context) => {
    const noPlink = needs('plink');
    if (noPlink) return context.skip(noPlink);
    // plink -batch asks nothing, so it is told the host key's fingerprint, as a careful user would be.
    const scanned = await execFileP('ssh-keyscan', ['-p', String(t.gateway.ssh.port), '127.0.0.1']);
    const fingerprint = keys.fingerprint(
      scanned.stdout.trim().split('\n').at(-1)!.split(' ').slice(1).join(' '),
    );
    const { stdout } = await execFileP(
      'plink',
      [
        '-batch',
        '-ssh',
        '-P',
        String(t.gateway.ssh.port),
        '-hostkey',
        fingerprint,
        '-pw',
        user.password,
        `${login}@127.0.0.1`,
        'id -un',
      ],
      { timeout: 60_000 },
    );
    assert.equal(stdout.trim(), username);
  });

  it('logs in with a registered key, and with the bare username when the user has one host', async () => {
    const result = await sshKey([`${username}@127.0.0.1`, 'echo key-ok']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout.trim(), 'key-ok');
  });

  it('refuses a key that is not the user’s', async () => {
    const stranger = keys.generate('ed25519');
    const file = path.join(work, 'stranger');
    writeFileSync(file, stranger.privateKey, { mode: 0o600 });
    const result = await sshWithKey(port, file, [`${login}@127.0.0.1`, 'echo in']);
    assert.equal(result.code, 255);
    assert.doesNotMatch(result.stdout, /in/);
  });

  it('gives an interactive PTY (ssh -tt) where tmux runs', async () => {
    const result = await sshPassword(['-tt', `${login}@127.0.0.1`, 'tty; tmux -V; stty size; exit 3']);
    assert.equal(result.code, 3, result.stderr);
    assert.match(result.stdout, /\/dev\/pts\/\d+/);
    assert.match(result.stdout, /tmux \d/);
  });

  it('moves a 50 MB file both ways intact with scp (SFTP and legacy protocols) and sftp', async () => {
    const big = path.join(work, 'big.bin');
    const chunks = Array.from({ length: 50 }, () => randomBytes(1024 * 1024));
    writeFileSync(big, Buffer.concat(chunks));
    const expected = await sha256File(big);
    const scpArgs = [...proxyOptions(port).map((a) => (a === '-p' ? '-P' : a)), ...keyOnly(keyFile)];

    const up = await runClient('scp', [...scpArgs, big, `${login}@127.0.0.1:big.bin`], {
      timeoutMs: 180_000,
    });
    assert.equal(up.code, 0, up.stderr);
    const remote = await sshKey([`${login}@127.0.0.1`, 'sha256sum big.bin']);
    assert.equal(remote.stdout.split(/\s+/)[0], expected);

    const back = path.join(work, 'back.bin');
    const down = await runClient('scp', [...scpArgs, '-O', `${login}@127.0.0.1:big.bin`, back], {
      timeoutMs: 180_000,
    });
    assert.equal(down.code, 0, down.stderr);
    assert.equal(await sha256File(back), expected);

    const batch = path.join(work, 'sftp.batch');
    const fetched = path.join(work, 'sftp-back.bin');
    writeFileSync(batch, `put ${big} via-sftp.bin\nget via-sftp.bin ${fetched}\nrm via-sftp.bin\n`);
    const sftp = await runClient('sftp', [...scpArgs, '-b', batch, `${login}@127.0.0.1`], {
      timeoutMs: 180_000,
    });
    assert.equal(sftp.code, 0, sftp.stderr);
    assert.equal(await sha256File(fetched), expected);
  });

  it('mounts the workspace home with sshfs through the proxy, both ways', async () => {
    const mountpoint = path.join(work, 'sshfs');
    mkdirSync(mountpoint);
    // sshfs stays behind as the mount's daemon, holding inherited pipes: wait for the exit, not the close.
    const mount = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(
        'sshfs',
        [
          '-p',
          String(port),
          '-F',
          '/dev/null',
          ...['StrictHostKeyChecking=no', 'UserKnownHostsFile=/dev/null', 'ConnectTimeout=10']
            .concat([`IdentityFile=${keyFile}`, 'IdentitiesOnly=yes', 'BatchMode=yes'])
            .flatMap((option) => ['-o', option]),
          `${login}@127.0.0.1:`,
          mountpoint,
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let stderr = '';
      child.stderr.on('data', (chunk) => (stderr += chunk));
      child.on('close', (code) => resolve({ code, stderr }));
    });
    assert.equal(mount.code, 0, mount.stderr);
    try {
      const marker = `written inside ${randomBytes(4).toString('hex')}`;
      const inside = await sshKey([`${login}@127.0.0.1`, `printf '%s' '${marker}' > from-inside.txt`]);
      assert.equal(inside.code, 0, inside.stderr);
      // Asynchronous file calls only: the proxy serving this mount runs in this very process.
      assert.equal(await readFile(path.join(mountpoint, 'from-inside.txt'), 'utf8'), marker);
      await writeFile(path.join(mountpoint, 'from-mount.txt'), 'written through sshfs');
      const back = await sshKey([`${login}@127.0.0.1`, 'cat from-mount.txt; stat -c %U from-mount.txt']);
      assert.equal(back.stdout, `written through sshfs${username}\n`);
    } finally {
      const unmount = await runClient('fusermount3', ['-u', mountpoint]);
      assert.equal(unmount.code, 0, unmount.stderr);
    }
  });

  it('forwards a local port (-L) to a server started inside the workspace', async () => {
    const remotePort = 20_000 + Math.floor(Math.random() * 20_000);
    const localPort = 40_000 + Math.floor(Math.random() * 20_000);
    // Serves one connection, then ends the command (and so the session).
    const server =
      `perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", ` +
      `LocalPort => ${remotePort}, Listen => 5, ReuseAddr => 1) or die "listen: $!"; ` +
      `$c = $s->accept; print $c "hello from the workspace\\n"; close $c'`;
    const session = sshKey([
      '-L',
      `127.0.0.1:${localPort}:127.0.0.1:${remotePort}`,
      `${login}@127.0.0.1`,
      server,
    ]);
    let text = '';
    await until('the forwarded server to answer', async () => {
      text = await readAll(localPort);
      return text.length > 0;
    });
    assert.equal(text, 'hello from the workspace\n');
    const result = await session;
    assert.equal(result.code, 0, result.stderr);
  });

  it('forwards a remote port (-R) so the workspace reaches a local server', async () => {
    const local = createServer((socket) => socket.end('HTTP/1.0 200 OK\r\n\r\nhello from the client\n'));
    servers.push(local);
    await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
    const localPort = (local.address() as { port: number }).port;
    const remotePort = 20_000 + Math.floor(Math.random() * 20_000);
    const result = await sshKey([
      '-o',
      'ExitOnForwardFailure=yes',
      '-R',
      `127.0.0.1:${remotePort}:127.0.0.1:${localPort}`,
      `${login}@127.0.0.1`,
      `for i in 1 2 3 4 5; do curl -fsS http://127.0.0.1:${remotePort}/ && exit 0; sleep 1; done; exit 1`,
    ]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, 'hello from the client\n');
  });

  it('forwards the agent (-A): the workspace lists the client’s key', async () => {
    const started = await runClient('ssh-agent', ['-s']);
    const socket = /SSH_AUTH_SOCK=([^;]+);/.exec(started.stdout)?.[1];
    const pid = Number(/SSH_AGENT_PID=(\d+);/.exec(started.stdout)?.[1]);
    assert.ok(socket && pid, started.stdout + started.stderr);
    agents.push(pid);
    const agentKey = keys.generate('ed25519', undefined, 'forwarded-key');
    const agentKeyFile = path.join(work, 'agent_key');
    writeFileSync(agentKeyFile, agentKey.privateKey, { mode: 0o600 });
    const added = await runClient('ssh-add', [agentKeyFile], { env: { SSH_AUTH_SOCK: socket } });
    assert.equal(added.code, 0, added.stderr);

    const result = await sshKey(['-A', `${login}@127.0.0.1`, 'ssh-add -l'], { SSH_AUTH_SOCK: socket });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, new RegExp(agentKey.fingerprint.replace(/[+/]/g, '\\$&')));
  });

  it('refuses a wrong password', async () => {
    const result = await sshPassword([`${login}@127.0.0.1`, 'echo in'], { password: 'not-the-password' });
    assert.notEqual(result.code, 0);
    assert.doesNotMatch(result.stdout, /in/);
    const failed = await events('auth.ssh.failed');
    assert.ok(failed.some((e) => e.data.reason === 'invalid_credentials'));
  });

  it('ends the open session when its host stops', async () => {
    const session = sshPassword([`${login}@127.0.0.1`, 'sleep 120'], { timeoutMs: 90_000 });
    await until('the session to be live', () => t.gateway.ssh.sessionCount() === 1);
    const stop = await t.request('POST', `/v1/admin/hosts/${host.id}/stop`);
    assert.equal(stop.status, 202);
    const cut = await session;
    assert.notEqual(cut.code, 0);
    await until('the session to be gone', () => t.gateway.ssh.sessionCount() === 0);
    await within(120_000, 'the host to stop', t.gateway.tasks.idle());

    const start = await t.request('POST', `/v1/admin/hosts/${host.id}/start`);
    await within(300_000, 'the workspace start', t.gateway.tasks.idle());
    const task = (await t.request('GET', `/v1/admin/tasks/${start.body.task_id}`)).body;
    assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  });

  it('closes a disabled user’s open session, refuses them, then refuses their stopped host', async () => {
    const started = Date.now();
    const session = sshPassword([`${login}@127.0.0.1`, 'sleep 120'], { timeoutMs: 90_000 });
    await until('the session to be live', () => t.gateway.ssh.sessionCount() === 1);
    const stats = await t.request('GET', '/v1/admin/dashboard/stats');
    assert.equal(stats.body.sessions.ssh, 1);

    const disabled = await t.request('PATCH', `/v1/admin/users/${user.id}`, { body: { status: 'disabled' } });
    assert.equal(disabled.status, 200);
    const cut = await session;
    assert.notEqual(cut.code, 0);
    assert.ok(Date.now() - started < 60_000, 'the session was not closed promptly');
    await until('the closed event', async () =>
      (await events('ssh.session.closed')).some((e) => e.data.reason === 'user_disabled'),
    );
    assert.equal(t.gateway.ssh.sessionCount(), 0);

    const refused = await sshPassword([`${login}@127.0.0.1`, 'echo in']);
    assert.equal(refused.code, 255);
    assert.match(refused.stderr, /this account is disabled/);

    // Disabling also stopped the host; once enabled again the host stays stopped, and the proxy never starts it.
    await within(120_000, 'the host to stop', t.gateway.tasks.idle());
    await t.request('PATCH', `/v1/admin/users/${user.id}`, { body: { status: 'active' } });
    const stopped = await sshPassword([`${login}@127.0.0.1`, 'echo in']);
    assert.equal(stopped.code, 255);
    assert.match(
      stopped.stderr,
      new RegExp(
        `host ${host.short_id} is stopped \\(stopped by the gateway at [^)]+, as the account was disabled or expired\\); start it`,
      ),
    );
    assert.equal((await t.request('GET', `/v1/admin/hosts/${host.id}`)).body.status, 'stopped');
  });

  it('rate-limits SSH logins: after 10 wrong passwords even the right one is refused', async () => {
    // Its own client address (127.0.0.2), so the failures of other tests do not count here.
    const from = ['-b', '127.0.0.2'];
    for (let i = 0; i < 10; i++) {
      const wrong = await sshPassword([...from, `${login}@127.0.0.1`, 'true'], { password: `wrong-${i}` });
      assert.notEqual(wrong.code, 0);
      assert.doesNotMatch(wrong.stderr, /too many failed/);
    }
    const limited = await sshPassword([...from, `${login}@127.0.0.1`, 'true']);
    assert.equal(limited.code, 255);
    assert.match(limited.stderr, /too many failed login attempts; try again in \d+ seconds/);
  });
});
