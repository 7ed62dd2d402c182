import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { labUnavailable } from '../../../test/lab/lab.js';
import { freePort } from '../../gateway/test/helpers/lab-gateway.js';
import { CcpWorkspace } from './helpers/ccp-workspace.js';

const skip = labUnavailable();

/** What a new user meets on a first run (issue 24): init's checks, doctor, a session command that fails. */
describe("ccp's first run, against a real workspace", { skip, timeout: 1_200_000 }, () => {
  const w = new CcpWorkspace('first');
  const { project } = w;
  let entryUrl: string;
  const { client, configFile, ccp, run } = w.driver;

  before(async () => {
    const entryPort = await freePort();
    entryUrl = `http://127.0.0.1:${entryPort}`;
    await w.start({ env: { ENTRY_PORT: String(entryPort) } });
    writeFileSync(path.join(project, 'README.md'), 'local only\n');
  });
  after(() => w.stop());

  it('init checks the gateway, its port, the short ID and the password before saving, with exit codes 4, 2, 1', async () => {
    const home = client('init', null);
    const init = (gateway: string, id: string, extra: Record<string, string> = {}) =>
      run(home, ['init', '--gateway', gateway, '--short-id', id], extra);

    // The entry-link port (what the access command shows) is named as such, with the API's address.
    const entryPort = await init(entryUrl, w.shortId);
    assert.equal(entryPort.code, 4, entryPort.stderr);
    assert.match(entryPort.stderr, /is the gateway's entry-link port/);
    assert.ok(entryPort.stderr.includes(`ccp init --gateway ${w.apiUrl}`), entryPort.stderr);
    // Nothing listening, and not a gateway at all.
    const closed = await init(`http://127.0.0.1:${await freePort()}`, w.shortId);
    assert.equal(closed.code, 2, closed.stderr);
    assert.match(closed.stderr, /cannot reach the gateway/);
    const elsewhere = await init(`${w.apiUrl}/dashboard-not-api`, w.shortId);
    assert.equal(elsewhere.code, 4, elsewhere.stderr);
    assert.match(elsewhere.stderr, /does not answer as a cloud-cli-proxy gateway/);
    // Unknown short ID, wrong password, a short ID of the wrong form.
    const unknown = await init(w.apiUrl, 'zzzzzzzz');
    assert.equal(unknown.code, 1, unknown.stderr);
    assert.match(unknown.stderr, /no host with short ID zzzzzzzz/);
    const wrong = await init(w.apiUrl, w.shortId, { CCP_PASSWORD: 'not-the-password' });
    assert.equal(wrong.code, 1, wrong.stderr);
    assert.match(wrong.stderr, /wrong password for host/);
    const typo = await init(w.apiUrl, 'k3m9');
    assert.equal(typo.code, 4, typo.stderr);
    assert.equal(existsSync(configFile(home)), false, 'nothing saved after a failed check');

    // In a terminal: the password is asked, a wrong one asked again; then saved, with the session command.
    const login = ccp(
      home,
      `login --gateway ${w.apiUrl} --short-id ${w.shortId} --session-command 'bash --norc'`,
      { CCP_PASSWORD: '' },
    );
    await login.waitFor(`Password for host ${w.shortId}:`);
    login.type('not-the-password\r');
    await login.waitFor('wrong password, try again');
    login.type(`${w.user.password}\r`);
    assert.equal(await login.exitCode(30_000), 0, login.screen);
    assert.match(
      login.screen,
      new RegExp(`host ${w.shortId} \\(${w.user.username}'s\\): password accepted; created`),
    );
    assert.match(login.screen, /saved .*config\.yaml/);
    const saved = readFileSync(configFile(home), 'utf8');
    assert.match(saved, /session_command: bash --norc/);
    assert.doesNotMatch(saved, /password/);
    // The check started nothing.
    assert.equal((await w.lab.t.request('GET', `/v1/admin/hosts/${w.hostId}`)).body.status, 'created');
  });

  it('doctor says what is ready and what to do, starting nothing; its exit code is the one ccp would end with', async () => {
    const wrongPort = ccp(client('doctor-port', { gateway: entryUrl }), 'doctor', { NO_COLOR: '1' });
    assert.equal(await wrongPort.exitCode(60_000), 4, wrongPort.screen);
    assert.match(wrongPort.screen, /FAIL\s+gateway: .*entry-link port.*the API is at/);
    assert.match(wrongPort.screen, /ok\s+terminal: xterm/);

    const wrongPassword = ccp(client('doctor-password', {}), 'doctor', {
      CCP_PASSWORD: 'not-the-password',
      NO_COLOR: '1',
    });
    assert.equal(await wrongPassword.exitCode(60_000), 1, wrongPassword.screen);
    assert.match(wrongPassword.screen, /FAIL\s+host: wrong password/);

    const stopped = ccp(client('doctor', {}), 'doctor', { NO_COLOR: '1' });
    assert.equal(await stopped.exitCode(60_000), 0, stopped.screen);
    for (const line of [
      /ok\s+config: /,
      /ok\s+gateway: .* answers as the gateway's API/,
      new RegExp(`ok\\s+host: ${w.shortId} \\(${w.user.username}'s\\): password accepted`),
      /ok\s+host state: created; ccp starts it when you connect/,
      /skip\s+workspace: the host is created/,
      /ok\s+local git: git version/,
      /ready for `ccp`/,
    ])
      assert.match(stopped.screen, line);
    assert.equal((await w.lab.t.request('GET', `/v1/admin/hosts/${w.hostId}`)).body.status, 'created');
  });

  it('after a reattach in another mount mode, or the same one, the shell is in the live folder', async () => {
    const home = client('reattach', { session_command: 'bash --norc' });
    /** Attaches in `mode`, runs `line` in the session's shell and returns what it printed after `label`. */
    const attach = async (mode: string, label: string, line: string) => {
      const session = ccp(home, `--session folder --mount-mode ${mode}`);
      await session.waitFor(new RegExp(`ccp: mount: ${mode} \\(`), 600_000);
      session.type(`${line}; echo "${label}-END-$((6*7))"\r`);
      await session.waitFor(`${label}-END-42`, 60_000);
      const screen = session.screen;
      // Detached, not ended: the shell and its folder stay in the session for the next attach.
      session.type('\u0002d');
      assert.equal(await session.exitCode(30_000), 0, screen);
      return screen.slice(screen.indexOf(`${label}-`));
    };
    const first = await attach('full', 'FULL', `cd '${project}' && echo "FULL-$(pwd -P)"`);
    assert.match(first, /FULL-\S*\/\.ccp\/hot\//);
    const moved = await attach('sshfs-only', 'SSHFS', `echo "SSHFS-$(pwd -P)"; echo from-shell > moved.txt`);
    assert.match(moved, /SSHFS-\/run\/ccp-mounts\//);
    assert.equal(readFileSync(path.join(project, 'moved.txt'), 'utf8'), 'from-shell\n');
    const again = await attach('sshfs-only', 'AGAIN', 'ls >/dev/null && echo "AGAIN-live-$((6*7))"');
    assert.match(again, /AGAIN-live-42/);
    assert.doesNotMatch(again, /Transport endpoint is not connected/);
    rmSync(path.join(project, 'moved.txt'));
  });

  it('a session command that fails keeps its output and status on screen, then a shell; --session-command runs another', async () => {
    const home = client('fails', { session_command: "sh -c 'echo cannot-reach-the-api >&2; exit 3'" });
    const failing = ccp(home, '--session fails');
    await failing.waitFor(/exited with status 3; its output is above/, 600_000);
    assert.match(failing.screen, /cannot-reach-the-api/);
    assert.match(failing.screen, /ccp --session-command <command>/);
    assert.ok(failing.screen.includes(configFile(home)), failing.screen);
    // The terminal is usable: a shell, in the folder.
    failing.type('echo "SHELL-$((6*7)) in $PWD"\r');
    await failing.waitFor(`SHELL-42 in ${project}`, 30_000);
    failing.type('exit\r');
    assert.equal(await failing.exitCode(30_000), 5, failing.screen);
    assert.match(failing.screen, /the session command `sh -c .*` ended with status 3/);

    const other = ccp(home, `--session other --session-command 'echo OPTION-$((6*7)); exec bash --norc'`);
    await other.waitFor('OPTION-42', 120_000);
    other.type('exit\r');
    assert.equal(await other.exitCode(30_000), 0, other.screen);

    // With the host running, doctor checks the workspace too.
    const doctor = ccp(home, 'doctor', { NO_COLOR: '1' });
    assert.equal(await doctor.exitCode(120_000), 0, doctor.screen);
    for (const line of [
      /ok\s+host state: running/,
      /ok\s+ssh: /,
      /ok\s+tmux: installed in the workspace/,
      /ok\s+session command: sh is installed/,
      /ok\s+folder mount: the gateway mounted a scratch folder/,
    ])
      assert.match(doctor.screen, line);
  });
});
