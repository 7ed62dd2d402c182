import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { labUnavailable } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { HOST_LABEL } from '../../src/runtime/container-specs.js';
import { freePort, type LabGateway, startLabGateway } from '../helpers/lab-gateway.js';
import { sshWithPassword } from '../helpers/openssh.js';
import { PtySession } from '../helpers/pty-session.js';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const exec = promisify(execFile);
const docker = new Docker({ socketPath: '/var/run/docker.sock' });
const skip = labUnavailable() || needs('ssh', 'sshpass');

// Debian's /bin/sh is dash, where a failed redirection on a special built-in (`: </dev/tty`) ends the shell.
describe('the scripts under dash and bash, with and without a terminal', { timeout: 120_000 }, () => {
  let t: TestGateway;
  let apiUrl: string;
  let entryPath: string;
  let password: string;

  before(async () => {
    const port = await freePort();
    apiUrl = `http://127.0.0.1:${port}`;
    t = await startTestGateway('sqlite', { HTTP_PORT: String(port), PUBLIC_API_URL: apiUrl });
    await t.listen();
    const user = await t.createUser('scriptuser');
    password = user.password;
    const host = (await t.request('POST', '/v1/admin/hosts', { body: { user_id: user.id } })).body;
    entryPath = `/entry/${host.short_id}`;
  });
  after(() => t?.close());

  const scripts = [
    { name: 'entry', path: () => entryPath, prompts: [] as string[] },
    { name: 'bootstrap', path: () => '/v1/bootstrap/script', prompts: ['scriptuser'] },
  ];
  for (const shell of ['dash', 'bash']) {
    for (const script of scripts) {
      it(`${script.name} under ${shell} without a terminal: exit 4 and says it needs one`, async () => {
        // setsid leaves the shell without a controlling terminal, so /dev/tty cannot be opened.
        const command = `curl -fsSL '${apiUrl}${script.path()}' | ${shell}`;
        const run = await exec('setsid', ['-w', shell, '-c', command], {
          env: { PATH: process.env.PATH },
        }).catch((error) => error);
        assert.equal(run.code, 4, `stdout: ${run.stdout}\nstderr: ${run.stderr}`);
        assert.match(run.stderr, /this script needs a terminal to read the password from/);
      });

      it(`${script.name} under ${shell} in a terminal: asks without echo and ends with the answer's exit code`, async () => {
        const cases = [
          { typed: 'not-the-password', code: 1, says: /cloud-cli-proxy: Wrong username or password/ },
          { typed: password, code: 8, says: /ask an administrator to bind an egress IP/ },
        ];
        for (const { typed, code, says } of cases) {
          const session = new PtySession(`curl -fsSL '${apiUrl}${script.path()}' | ${shell}`, {
            PATH: process.env.PATH,
          });
          for (const answer of script.prompts) {
            await session.waitFor('Username: ');
            session.type(`${answer}\r`);
          }
          await session.waitFor('Password for ');
          session.type(`${typed}\r`);
          assert.equal(await session.exitCode(30_000), code, session.screen);
          assert.match(session.screen, says);
          assert.ok(!session.screen.includes(typed), 'the password is not echoed');
        }
      });
    }
  }
});

describe('the entry and bootstrap scripts, typed at in a terminal, against real workspaces', {
  skip,
  timeout: 900_000,
}, () => {
  const suffix = randomBytes(3).toString('hex');
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-access-'));
  const home = path.join(work, 'home');
  let lab: LabGateway;
  let t: TestGateway;
  let apiUrl: string;
  let entryUrl: string;

  const env = (extra: Record<string, string> = {}) => ({
    PATH: process.env.PATH,
    HOME: home,
    LANG: 'C.UTF-8',
    ...extra,
  });
  const createHost = (userId: string, bound = true) => lab.createHost(userId, bound);
  const hostStatus = async (id: string) => (await t.request('GET', `/v1/admin/hosts/${id}`)).body.status;
  /** Types a command that proves which workspace the shell is in, and ends it with status 3. */
  const proveWorkspace = async (session: PtySession) => {
    await session.waitFor('connecting to', 300_000);
    session.type('echo "WS=$(hostname)=$(id -un)=" ; exit 3\r');
    return session.exitCode(60_000);
  };
  const workspaceHostname = async (hostId: string) => {
    const [container] = await docker.listContainers({
      filters: { label: [`${HOST_LABEL}=${hostId}`, 'cloud-cli-proxy.role=workspace'] },
    });
    assert.ok(container, 'the workspace container runs');
    return (await docker.getContainer(container.Id).inspect()).Config.Hostname;
  };

  before(async () => {
    const [httpPort, entryPort] = [await freePort(), await freePort()];
    apiUrl = `http://127.0.0.1:${httpPort}`;
    entryUrl = `http://127.0.0.1:${entryPort}`;
    mkdirSync(home, { mode: 0o700 });
    lab = await startLabGateway({
      HTTP_PORT: String(httpPort),
      ENTRY_PORT: String(entryPort),
      PUBLIC_HOST: '127.0.0.1',
      PUBLIC_API_URL: apiUrl,
      PUBLIC_ENTRY_URL: entryUrl,
    });
    t = lab.t;
  });

  after(async () => {
    await lab?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('entry: the access command asks for the password, starts the stopped host and lands in its shell', async () => {
    const user = await t.createUser(`ea${suffix}`);
    const host = await createHost(user.id);
    assert.equal(host.access_command, `curl -fsSL ${entryUrl}/entry/${host.short_id} | sh`);
    const session = new PtySession(host.access_command, env());
    await session.waitFor(`Password for host ${host.short_id}: `);
    session.type(`${user.password}\r`);
    await session.waitFor(/is starting: /, 30_000);
    const code = await proveWorkspace(session);
    assert.equal(code, 3, session.screen);
    assert.ok(!session.screen.includes(user.password), 'the password is not echoed');
    assert.match(session.screen, new RegExp(`WS=${await workspaceHostname(host.id)}=ea${suffix}=`));
    assert.equal(await hostStatus(host.id), 'running');
  });

  it('entry: wrong password, disabled owner, unbound host and a vanished host each end with their exit code', async () => {
    const user = await t.createUser(`eb${suffix}`);
    const host = await createHost(user.id);
    const run = async (command: string, password: string) => {
      const session = new PtySession(command, env());
      await session.waitFor('Password for host');
      session.type(`${password}\r`);
      return { code: await session.exitCode(30_000), screen: session.screen };
    };
    const wrong = await run(host.access_command, 'not-the-password');
    assert.equal(wrong.code, 1, wrong.screen);
    assert.match(wrong.screen, /Wrong username or password/);

    const unboundUser = await t.createUser(`ec${suffix}`);
    const unbound = await createHost(unboundUser.id, false);
    const noEgress = await run(unbound.access_command, unboundUser.password);
    assert.equal(noEgress.code, 8, noEgress.screen);
    assert.match(noEgress.screen, /egress/);

    // The script was fetched while the host existed; the host is deleted before the password is typed.
    const doomed = await createHost(unboundUser.id, false);
    const session = new PtySession(doomed.access_command, env());
    await session.waitFor('Password for host');
    assert.equal((await t.request('DELETE', `/v1/admin/hosts/${doomed.id}`)).status, 204);
    session.type(`${unboundUser.password}\r`);
    assert.equal(await session.exitCode(30_000), 7, session.screen);

    await t.request('PATCH', `/v1/admin/users/${user.id}`, { body: { status: 'disabled' } });
    const disabled = await run(host.access_command, user.password);
    assert.equal(disabled.code, 5, disabled.screen);
    assert.match(disabled.screen, /disabled/);

    const unknown = await exec('sh', ['-c', `curl -fsSL ${entryUrl}/entry/zzzzzzzz`]).catch((error) => error);
    assert.equal(unknown.code, 22, 'curl -f reports the 404');
    assert.match(unknown.stderr, /404/);
  });

  it('bootstrap: username and password, the host starts, a one-time ticket logs in (without sshpass)', async () => {
    const user = await t.createUser(`bb${suffix}`);
    const host = await createHost(user.id);
    // A PATH with every tool of this machine except sshpass, so the script uses SSH_ASKPASS.
    const bin = path.join(work, 'bin-without-sshpass');
    mkdirSync(bin);
    for (const dir of ['/usr/local/bin', '/usr/bin', '/bin']) {
      for (const name of readdirSync(dir)) {
        if (name === 'sshpass') continue;
        try {
          symlinkSync(path.join(dir, name), path.join(bin, name));
        } catch {}
      }
    }
    const session = new PtySession(`curl -fsSL ${apiUrl}/v1/bootstrap/script | sh`, env({ PATH: bin }));
    await session.waitFor('Username: ');
    session.type(`bb${suffix}\r`);
    await session.waitFor(`Password for bb${suffix}: `);
    session.type(`${user.password}\r`);
    await session.waitFor(/starting your host/, 30_000);
    const code = await proveWorkspace(session);
    assert.equal(code, 3, session.screen);
    assert.match(session.screen, new RegExp(`WS=${await workspaceHostname(host.id)}=bb${suffix}=`));

    const handoffs = (await t.request('GET', `/v1/admin/events?type=bootstrap.handoff&user_id=${user.id}`))
      .body;
    assert.equal(handoffs.total, 1);
    const opened = (await t.request('GET', `/v1/admin/events?type=ssh.session.opened&user_id=${user.id}`))
      .body;
    assert.equal(opened.total, 1, 'the ticket opened exactly one session');
  });

  it('bootstrap: the ticket works once; a wrong password exits 1', async () => {
    const user = await t.createUser(`bc${suffix}`);
    const host = await createHost(user.id);
    const created = await t.request('POST', '/v1/bootstrap/sessions', {
      token: null,
      body: { username: `bc${suffix}`, password: user.password },
    });
    assert.equal(created.status, 202);
    const deadline = Date.now() + 300_000;
    let status = '';
    while (status !== 'succeeded' && Date.now() < deadline) {
      status = (await t.request('GET', created.body.status_url, { token: null })).body.status;
      assert.notEqual(status, 'failed');
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const handoff = (
      await t.request('GET', `${created.body.status_url}/handoff`, {
        token: null,
        headers: { 'x-bootstrap-secret': created.body.handoff_secret },
      })
    ).body;
    const ssh = (password: string) =>
      sshWithPassword(handoff.port, password, [`${handoff.user}@${handoff.host}`, 'id -un']);
    const first = await ssh(handoff.password);
    assert.equal(first.stdout?.trim(), `bc${suffix}`, first.stderr);
    const second = await ssh(handoff.password);
    assert.notEqual(second.code, 0, 'the ticket is refused the second time');
    assert.match(second.stderr, /Permission denied/);
    assert.equal(await hostStatus(host.id), 'running');

    const session = new PtySession(`curl -fsSL ${apiUrl}/v1/bootstrap/script | sh -s -- bc${suffix}`, env());
    await session.waitFor(`Password for bc${suffix}: `);
    session.type('wrong-password\r');
    assert.equal(await session.exitCode(30_000), 1, session.screen);
  });
});
