/**
 * Attack (workspace -> the user's laptop): root in the workspace writes the mounted folder so that the user's
 * own git on the laptop, run later outside ccp, runs a program: a hook, a `.git/config` with core.hooksPath, a
 * `commondir` or a gitlink `.git` file pointing git at a config the workspace wrote elsewhere, a folder full of
 * hooks moved into place, a link inside `.git`. Each write is refused; ordinary files, and git's own objects
 * and refs, are still written; a local `git commit` afterwards runs nothing the workspace planted.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { needs } from '../../../../test/support/needs.js';
import { KnownHosts } from '../../src/known-hosts.js';
import { connectSsh, execCollect, shellQuote } from '../../src/ssh-connection.js';
import { startLocalSshd } from '../helpers/local-sshd.js';
import { mountWithPassiveSshfs } from '../helpers/passive-sshfs.js';

describe('attack: the workspace plants git hooks and config in the mounted folder', {
  skip: needs('fuse'),
  timeout: 60_000,
}, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-cli-git-control-'));
  const local = path.join(work, 'project');
  const mountpoint = path.join(work, 'mnt');
  /** Every planted program appends to this file: it must never appear. */
  const pwned = path.join(work, 'pwned');
  const laptopGit = (...args: string[]) =>
    execFileSync('git', ['-C', local, ...args], {
      encoding: 'utf8',
      env: { ...process.env, HOME: work, GIT_CONFIG_NOSYSTEM: '1' },
    });
  let sshd: Awaited<ReturnType<typeof startLocalSshd>>;

  before(async () => {
    mkdirSync(local);
    mkdirSync(mountpoint);
    laptopGit('init', '-q');
    laptopGit('config', 'user.email', 'user@laptop.test');
    laptopGit('config', 'user.name', 'User');
    sshd = await startLocalSshd(process.env);
  });

  after(() => {
    spawnSync('fusermount3', ['-u', '-z', mountpoint]);
    sshd.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('refuses every write that would make the laptop’s git run something, and keeps git working', async () => {
    const configBefore = readFileSync(path.join(local, '.git/config'), 'utf8');
    const knownHosts = new KnownHosts(path.join(work, 'known_hosts'));
    const client = await connectSsh(
      { host: '127.0.0.1', port: sshd.port, username: 'u', password: 'p' },
      knownHosts,
    );
    try {
      const channel = await mountWithPassiveSshfs(client, local, mountpoint);
      const m = shellQuote(mountpoint);
      const hook = `#!/bin/sh\necho planted >> ${pwned}\n`;
      const attempts: [string, string][] = [
        ['hook', `printf %s ${shellQuote(hook)} > ${m}/.git/hooks/pre-commit`],
        ['config', `printf '[core]\\n\\thooksPath = ../evil\\n' >> ${m}/.git/config`],
        [
          'config replaced',
          `printf '[core]\\n' > ${m}/.git/config.new && mv ${m}/.git/config.new ${m}/.git/config`,
        ],
        ['sample enabled', `mv ${m}/.git/hooks/pre-commit.sample ${m}/.git/hooks/pre-commit`],
        [
          'sample made executable',
          `chmod 755 ${m}/.git/hooks/applypatch-msg.sample && test -x ${m}/.git/hooks/applypatch-msg.sample`,
        ],
        ['commondir', `printf '../evil\\n' > ${m}/.git/commondir`],
        ['case variant', `mkdir -p ${m}/.GIT/HOOKS`],
        ['gitlink file', `mkdir -p ${m}/sub && printf 'gitdir: ../evil\\n' > ${m}/sub/.git`],
        ['repository moved into place', `mkdir -p ${m}/evil/hooks && mv ${m}/evil ${m}/sub/.git`],
        ['folder moved into .git', `mkdir -p ${m}/mods/x/hooks && mv ${m}/mods ${m}/.git/modules`],
        ['link as .git', `ln -s ../evil ${m}/sub/.git`],
        ['link inside .git', `ln -s ../evil ${m}/.git/linked`],
      ];
      for (const [what, command] of attempts) {
        const result = await execCollect(client, command);
        assert.notEqual(result.code, 0, `${what}: the write went through`);
        assert.match(result.stderr, /Permission denied|Operation not permitted/, `${what}: ${result.stderr}`);
      }
      assert.equal(readFileSync(path.join(local, '.git/config'), 'utf8'), configBefore);
      assert.equal(existsSync(path.join(local, '.git/hooks/pre-commit')), false);
      assert.equal(existsSync(path.join(local, '.git/commondir')), false);
      assert.equal(existsSync(path.join(local, 'sub/.git')), false);

      // What is not control stays writable: the project, and git's own state (objects, refs, HEAD).
      const ordinary = await execCollect(
        client,
        `printf 'from the workspace\\n' > ${m}/notes.txt && mkdir -p ${m}/.git/objects/aa && printf x > ${m}/.git/objects/aa/tmp && rm ${m}/.git/objects/aa/tmp && printf 'workspace branch\\n' > ${m}/.git/description`,
      );
      assert.equal(ordinary.code, 0, ordinary.stderr);
      assert.equal(readFileSync(path.join(local, 'notes.txt'), 'utf8'), 'from the workspace\n');
      channel.close();
    } finally {
      client.end();
    }
    laptopGit('add', 'notes.txt');
    laptopGit('commit', '-q', '-m', 'after the attempts');
    assert.equal(laptopGit('log', '--format=%s').trim(), 'after the attempts');
    assert.equal(existsSync(pwned), false, 'a planted program ran on the laptop');
  });
});
