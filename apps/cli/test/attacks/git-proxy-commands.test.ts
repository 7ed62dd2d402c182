/**
 * Attack (workspace -> the user's laptop): `proxy_commands: [git]` runs the git the workspace asks for on the
 * user's machine. Root in the workspace picks the arguments (`-c alias.x=!cmd`, `-c core.fsmonitor=…`,
 * `--upload-pack`, `--output`, a file to read) and writes the repository through the mount (`.git/config`
 * with core.fsmonitor, core.pager, core.editor, core.sshCommand, a filter driver; hooks; a `.git` that points
 * at another repository). Nothing of it may run or be read here: each is refused with a clear message and a
 * non-zero status, or made inert; `git status`, `git log` and `git commit` still work.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  appendFileSync,
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client } from 'ssh2';
import { needs } from '../../../../test/support/needs.js';
import { CommandProxy, WRAPPER_DIR } from '../../src/command-proxy.js';
import { KnownHosts } from '../../src/known-hosts.js';
import { connectSsh, execCollect, shellQuote } from '../../src/ssh-connection.js';
import { startLocalSshd } from '../helpers/local-sshd.js';

describe('attack: the workspace makes the proxied git run or read something on the user machine', {
  skip: needs('git'),
}, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-cli-git-attack-'));
  const workspaceHome = path.join(work, 'workspace-home');
  /** This machine's HOME for the test: the user's own git configuration (an identity), and nothing else. */
  const laptopHome = path.join(work, 'laptop-home');
  /** The folder ccp mounts into the workspace. */
  const mounted = path.join(work, 'mounted');
  const secret = path.join(work, 'secret.txt');
  /** Every program the attacker plants appends its name here: the file must never appear. */
  const pwned = path.join(work, 'pwned');
  const evil = path.join(work, 'evil.sh');
  const saved = { HOME: process.env.HOME, XDG_CONFIG_HOME: process.env.XDG_CONFIG_HOME };
  let sshd: Awaited<ReturnType<typeof startLocalSshd>>;
  let client: Client;

  const git = (cwd: string, ...args: string[]) => execFileSync('git', args, { cwd }).toString();
  /** A repository with one commit, `the-first-commit`, under the mounted folder. */
  const repository = (name: string) => {
    const dir = path.join(mounted, name);
    mkdirSync(dir, { recursive: true });
    git(dir, 'init', '-q', '-b', 'main');
    writeFileSync(path.join(dir, 'a.txt'), 'a\n');
    git(dir, 'add', '.');
    git(dir, 'commit', '-qm', 'the-first-commit');
    return dir;
  };
  const inWorkspace = (cwd: string, command: string, input?: string) =>
    execCollect(client, `cd ${shellQuote(cwd)} && PATH="${WRAPPER_DIR}:$PATH" && ${command}`, input);
  const assertNothingRan = () =>
    assert.equal(existsSync(pwned), false, existsSync(pwned) ? readFileSync(pwned, 'utf8') : '');
  const assertRefused = (result: { code: number; stderr: string }, why: RegExp) => {
    assert.equal(result.code, 126, result.stderr);
    assert.match(result.stderr, /^ccp: /);
    assert.match(result.stderr, why);
  };

  before(async () => {
    for (const dir of [workspaceHome, laptopHome, mounted]) mkdirSync(dir);
    process.env.HOME = laptopHome;
    delete process.env.XDG_CONFIG_HOME;
    writeFileSync(
      path.join(laptopHome, '.gitconfig'),
      '[user]\n\tname = Laptop User\n\temail = user@laptop\n',
    );
    writeFileSync(secret, 'the-laptop-secret\n');
    writeFileSync(evil, `#!/bin/sh\necho "$1" >>${shellQuote(pwned)}\ncat >/dev/null 2>&1 </dev/null\n`);
    chmodSync(evil, 0o755);
    sshd = await startLocalSshd({ PATH: process.env.PATH, HOME: workspaceHome });
    client = await connectSsh(
      { host: '127.0.0.1', port: sshd.port, username: 'u', password: 'p' },
      new KnownHosts(path.join(work, 'known_hosts')),
    );
    const proxy = new CommandProxy(['git'], mounted);
    const port = await proxy.listen(client);
    assert.equal((await execCollect(client, proxy.installScript(port))).code, 0);
  });

  after(() => {
    client?.end();
    sshd?.close();
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    rmSync(work, { recursive: true, force: true });
  });

  it('refuses options and subcommands that run a program here', async () => {
    const repo = repository('options');
    const refusals: [string, RegExp][] = [
      [`git -c 'alias.x=!${evil} alias' x`, /-c is refused/],
      [`git -c 'core.fsmonitor=${evil} fsmonitor' status`, /-c is refused/],
      [`git --config-env=core.pager=EVIL log`, /--config-env=core.pager=EVIL is refused/],
      [`git --exec-path=${work} status`, /--exec-path=.* is refused/],
      [`git -C ${work} status`, /-C is refused/],
      [`git --git-dir=${repo}/.git status`, /--git-dir=.* is refused/],
      [`git rebase --exec '${evil} rebase' HEAD`, /git rebase --exec is refused/],
      [`git config --global alias.st '!${evil} global-alias'`, /git config --global is refused/],
      [`git fetch --upload-pack='${evil} upload-pack' .`, /--upload-pack is refused/],
      [`git push --exec='${evil} receive-pack' . main`, /--exec is refused/],
      [`git ls-remote -u '${evil} ls-remote' .`, /-u is refused/],
      [`git fetch --all`, /--all is refused/],
      [`git remote update`, /git remote update is not run on your machine/],
      [`git grep -O'${evil} pager' a`, /-O.* is refused/],
      [`git diff --ext-diff`, /--ext-diff is refused/],
      [`git log --help`, /--help is refused/],
      [`git some-alias`, /git some-alias is not run on your machine/],
      [`git`, /no git command/],
    ];
    for (const [command, why] of refusals) {
      const result = await inWorkspace(repo, command);
      assertRefused(result, why);
    }
    assertNothingRan();
    assert.equal(existsSync(path.join(laptopHome, '.gitconfig.lock')), false);
    assert.doesNotMatch(readFileSync(path.join(laptopHome, '.gitconfig'), 'utf8'), /alias/);
  });

  it("runs nothing the repository's configuration or hooks name, and git still works", async () => {
    const repo = repository('configured');
    // Written as the workspace writes them, through the mount.
    const config = path.join(repo, '.git', 'config');
    appendFileSync(
      config,
      [
        '[core]',
        `\tfsmonitor = ${evil} fsmonitor`,
        `\tpager = ${evil} pager`,
        `\teditor = ${evil} editor`,
        `\tsshCommand = ${evil} ssh-command`,
        `\taskPass = ${evil} askpass`,
        '[sequence]',
        `\teditor = ${evil} sequence-editor`,
        '[pager]',
        `\tlog = ${evil} pager-log`,
        '[credential]',
        `\thelper = !${evil} credential`,
        '[interactive]',
        `\tdiffFilter = ${evil} diff-filter`,
        '[remote "origin"]',
        '\turl = ssh://127.0.0.1:1/nothing.git',
        '\tfetch = +refs/heads/*:refs/remotes/origin/*',
        '[protocol "ext"]',
        '\tallow = always',
        '[remote "ext"]',
        `\turl = ext::${evil} ext-transport`,
        '',
      ].join('\n'),
    );
    for (const hook of [
      'pre-commit',
      'commit-msg',
      'post-commit',
      'post-checkout',
      'reference-transaction',
    ]) {
      writeFileSync(path.join(repo, '.git', 'hooks', hook), `#!/bin/sh\n${evil} hook-${hook}\n`, {
        mode: 0o755,
      });
    }
    writeFileSync(path.join(repo, 'a.txt'), 'changed\n');

    const status = await inWorkspace(repo, 'git status --short');
    assert.deepEqual(status, { code: 0, stdout: ' M a.txt\n', stderr: '' });
    const log = await inWorkspace(repo, 'git log --format=%s');
    assert.deepEqual(log, { code: 0, stdout: 'the-first-commit\n', stderr: '' });
    // The user's own configuration (the identity in ~/.gitconfig) still applies.
    const commit = await inWorkspace(repo, 'git commit -qam the-second-commit && git log -1 --format=%an/%s');
    assert.deepEqual(commit, { code: 0, stdout: 'Laptop User/the-second-commit\n', stderr: '' });
    const noMessage = await inWorkspace(repo, 'git commit --allow-empty');
    assert.notEqual(noMessage.code, 0);
    const checkout = await inWorkspace(repo, 'git checkout -q -b other && echo more >>a.txt');
    assert.equal(checkout.code, 0, checkout.stderr);
    const patch = await inWorkspace(repo, 'git add -p', 'q\n');
    assert.equal(patch.code, 0, patch.stderr);
    const fetch = await inWorkspace(repo, 'git fetch origin');
    assert.notEqual(fetch.code, 0);
    // Remotes the repository did not have when ccp started are not reached.
    const ext = await inWorkspace(repo, 'git fetch ext');
    assertRefused(ext, /name a remote this repository had when ccp started/);
    assertNothingRan();
  });

  it('refuses a repository whose configuration sets what no option undoes: a driver program, TLS checks', async () => {
    const repo = repository('filtered');
    writeFileSync(path.join(repo, '.gitattributes'), '* filter=evil diff=evil merge=evil\n');
    git(repo, 'config', 'filter.evil.clean', `${evil} clean`);
    git(repo, 'config', 'diff.evil.textconv', `${evil} textconv`);
    writeFileSync(path.join(repo, 'a.txt'), 'changed\n');
    const status = await inWorkspace(repo, 'git status');
    assertRefused(status, /configuration sets filter\.evil\.clean/);
    git(repo, 'config', '--unset', 'filter.evil.clean');
    const diff = await inWorkspace(repo, 'git diff');
    assertRefused(diff, /configuration sets diff\.evil\.textconv/);
    git(repo, 'config', '--unset', 'diff.evil.textconv');
    // Credentials for a real host sent, unchecked, to a machine of the workspace's choosing.
    git(repo, 'config', 'http.https://github.com/.sslVerify', 'false');
    const push = await inWorkspace(repo, 'git push https://github.com/user/repo.git main');
    assertRefused(
      push,
      /configuration sets http\.https:\/\/github\.com\/\.sslverify, where your credentials go/,
    );
    assertNothingRan();
  });

  it('reads and writes no file outside the mounted folder', async () => {
    const repo = repository('files');
    symlinkSync(secret, path.join(repo, 'link'));
    // Another repository of the user's, outside the folder.
    const privateRepo = path.join(work, 'private');
    mkdirSync(privateRepo);
    git(privateRepo, 'init', '-q', '-b', 'main');
    git(privateRepo, 'commit', '-q', '--allow-empty', '-m', 'private-history');
    const outsidePath = /(is|leads) outside the mounted folder/;
    const attempts: [string, RegExp][] = [
      [`git log --output=${work}/written`, /--output is refused/],
      [`git log --grep -- --output=${work}/written`, /--grep -- is refused/],
      [`git diff --no-index ${secret} /dev/null`, /--no-index is refused/],
      [`git diff ${secret} a.txt`, outsidePath],
      [`git commit --allow-empty -F ../../secret.txt`, outsidePath],
      [`git commit --allow-empty -Flink`, outsidePath],
      [`git commit --allow-empty --file=link`, outsidePath],
      [`git hash-object -w link`, outsidePath],
      [`git blame --contents ${secret} a.txt`, outsidePath],
      [`git fetch ${privateRepo}`, outsidePath],
    ];
    for (const [command, why] of attempts) {
      const result = await inWorkspace(repo, command);
      assertRefused(result, why);
      assert.doesNotMatch(result.stdout, /the-laptop-secret/);
    }
    assert.equal(existsSync(path.join(work, 'written')), false);

    // The workspace points a `.git` file at the private repository.
    const redirected = path.join(mounted, 'redirected');
    mkdirSync(redirected);
    writeFileSync(path.join(redirected, '.git'), `gitdir: ${privateRepo}/.git\n`);
    const log = await inWorkspace(redirected, 'git log --format=%s');
    assertRefused(log, /is not inside the mounted folder/);
    assert.doesNotMatch(log.stdout, /private-history/);
    // The same through a link, and through core.worktree.
    rmSync(path.join(redirected, '.git'));
    symlinkSync(path.join(privateRepo, '.git'), path.join(redirected, '.git'));
    assertRefused(await inWorkspace(redirected, 'git log --format=%s'), /is not inside the mounted folder/);
    // Objects borrowed from the private repository, read by their name.
    const borrowing = repository('borrowing');
    writeFileSync(
      path.join(borrowing, '.git', 'objects', 'info', 'alternates'),
      `${privateRepo}/.git/objects\n`,
    );
    const borrowed = await inWorkspace(
      borrowing,
      `git cat-file -p ${git(privateRepo, 'rev-parse', 'HEAD').trim()}`,
    );
    assertRefused(borrowed, /borrows objects from another one/);
    assert.doesNotMatch(borrowed.stdout, /private-history/);
    const worktree = repository('worktree');
    git(worktree, 'config', 'core.worktree', work);
    assertRefused(await inWorkspace(worktree, 'git status'), /is not inside the mounted folder/);
  });

  it('still runs the git a user runs in the workspace, with stdin and exit status', async () => {
    const repo = repository('plain');
    assert.deepEqual(await inWorkspace(repo, 'git -P log --format=%s'), {
      code: 0,
      stdout: 'the-first-commit\n',
      stderr: '',
    });
    const version = await inWorkspace(repo, 'git --version');
    assert.deepEqual(version, { code: 0, stdout: execFileSync('git', ['--version']).toString(), stderr: '' });
    const inFolder = await inWorkspace(repo, 'mkdir -p sub && cd sub && touch b && git status --short');
    assert.deepEqual(inFolder, { code: 0, stdout: '?? ./\n', stderr: '' });
    const hashed = await inWorkspace(repo, 'git hash-object --stdin', 'hello');
    assert.equal(
      hashed.stdout.trim(),
      execFileSync('git', ['hash-object', '--stdin'], { input: 'hello' }).toString().trim(),
    );
    const message = await inWorkspace(
      repo,
      'git commit -q --allow-empty -F - && git log -1 --format=%s',
      'from-stdin',
    );
    assert.deepEqual(message, { code: 0, stdout: 'from-stdin\n', stderr: '' });
    const missing = await inWorkspace(repo, 'git show no-such-ref');
    assert.equal(missing.code, 128);
    assert.match(missing.stderr, /no-such-ref/);
  });
});
