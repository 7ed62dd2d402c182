import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client } from 'ssh2';
import { needs } from '../../../test/support/needs.js';
import { CommandProxy, WRAPPER_DIR } from '../src/command-proxy.js';
import { KnownHosts } from '../src/known-hosts.js';
import { connectSsh, execCollect } from '../src/ssh-connection.js';
import { startLocalSshd } from './helpers/local-sshd.js';

// The command proxy end to end on one machine: the "workspace" is a local SSH server with its own HOME; the
// wrapper it installs calls back over the SSH connection.
describe('the command proxy over the SSH connection', { skip: needs('git') }, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-cli-proxy-'));
  const home = path.join(work, 'workspace-home');
  const project = path.join(work, 'project');
  let sshd: Awaited<ReturnType<typeof startLocalSshd>>;
  let client: Client;

  before(async () => {
    mkdirSync(home);
    mkdirSync(project);
    execFileSync('git', ['init', '-q', '-b', 'main'], { cwd: project });
    writeFileSync(path.join(project, 'a.txt'), 'a\n');
    execFileSync('git', ['add', '.'], { cwd: project });
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@e', 'commit', '-qm', 'the-local-commit'], {
      cwd: project,
    });
    sshd = await startLocalSshd({ PATH: process.env.PATH, HOME: home });
    client = await connectSsh(
      { host: '127.0.0.1', port: sshd.port, username: 'u', password: 'p' },
      new KnownHosts(path.join(work, 'known_hosts')),
    );
  });

  after(() => {
    client?.end();
    sshd?.close();
    rmSync(work, { recursive: true, force: true });
  });

  const inWorkspace = (command: string, input?: string) =>
    execCollect(client, `cd '${project}' && PATH="${WRAPPER_DIR}:$PATH" && ${command}`, input);

  it('runs listed commands here with arguments, stdin, output and status; refuses the rest', async () => {
    const proxy = new CommandProxy(['git', 'no-such-tool-here'], project);
    const port = await proxy.listen(client);
    assert.equal((await execCollect(client, proxy.installScript(port))).code, 0);

    const log = await inWorkspace('git log --format=%s');
    assert.deepEqual(log, { code: 0, stdout: 'the-local-commit\n', stderr: '' });
    const hashed = await inWorkspace('git hash-object --stdin', 'hello');
    assert.equal(
      hashed.stdout.trim(),
      execFileSync('git', ['hash-object', '--stdin'], { input: 'hello' }).toString().trim(),
    );
    // Called from a terminal (as in the tmux session), where stdin is not forwarded.
    const tty = await inWorkspace(`script -qec 'git log --format=%s' /dev/null`);
    assert.equal(tty.stdout.replaceAll('\r', ''), 'the-local-commit\n');
    const missing = await inWorkspace('git show no-such-ref');
    assert.equal(missing.code, 128);
    assert.match(missing.stderr, /no-such-ref/);

    const absent = await inWorkspace('no-such-tool-here --version');
    assert.equal(absent.code, 127);
    assert.match(absent.stderr, /no-such-tool-here did not start on your machine/);

    const marker = path.join(work, 'never');
    const refused = await inWorkspace(`ln -s ~/.ccp/proxy-command ./touch && ./touch '${marker}'`);
    assert.equal(refused.code, 126);
    assert.match(refused.stderr, /touch is not in proxy_commands/);
    assert.equal(existsSync(marker), false);
    execFileSync('rm', ['-f', path.join(project, 'touch')]);
  });

  it('with [] installs nothing, so the workspace runs its own command', async () => {
    const proxy = new CommandProxy([], project);
    await execCollect(client, proxy.installScript(null));
    const listed = await execCollect(
      client,
      `ls -A ${WRAPPER_DIR}; test -e ~/.ccp/proxy.conf; echo "conf=$?"`,
    );
    assert.equal(listed.stdout, 'conf=1\n');
  });
});
