/**
 * The git allow-list against the git installed here: every option `git <command> -h` prints for each allowed
 * command is either in the allow-list, with a reason and taking its value the way git does (else a value
 * would be read by git as an option, or an option as a value), or refused by the policy with a message that
 * names it. Then generated calls (fixed seed, bounded count) run through the policy and real git in a folder
 * full of traps: none runs a file of the folder or reads a file outside it.
 */
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { needs } from '../../../test/support/needs.js';
import { commandPolicy, type PolicyContext } from '../src/command-policy.js';
import { BUILT_IN_STRATEGIES, GIT_SUBCOMMANDS, gitSubcommand } from '../src/git-allow-list.js';
import { checkGitArguments, type GitCall } from '../src/git-arguments.js';
import { prepareGit } from '../src/git-environment.js';
import { startLocalSshd } from './helpers/local-sshd.js';

const run = promisify(execFile);

type GitKind = 'none' | 'optional' | 'separate' | 'attached';

/** The options `git <command> -h` lists: each spelling with how it takes a value. */
function listedOptions(command: string): { name: string; kind: GitKind }[] {
  const help = spawnSync('git', [command, '-h'], { encoding: 'utf8' });
  const listed: { name: string; kind: GitKind }[] = [];
  for (const line of `${help.stdout}${help.stderr}`.split('\n')) {
    if (!/^ {2,}-/.test(line)) continue;
    const spec = line.trim().split(/ {2,}/)[0] ?? '';
    if (spec === '-NUM') continue;
    const spellings = spec.split(', ');
    const last = spellings.at(-1) ?? '';
    const kindOf = (text: string): GitKind => {
      if (/^-{1,2}[A-Za-z0-9][\w-]*\[/.test(text)) return 'optional';
      if (/^-{1,2}[A-Za-z0-9][\w-]* ([<(]|\[\(|\S+\|)/.test(text)) return 'separate';
      if (/^--[\w-]+=/.test(text) || /^-[A-Za-z0-9]</.test(text)) return 'attached';
      return 'none';
    };
    const kind = kindOf(last);
    for (const spelling of spellings) {
      const name = /^-{1,2}[A-Za-z0-9][\w-]*|^-[A-Za-z0-9]/.exec(spelling)?.[0];
      if (!name) continue;
      listed.push({ name: name.length > 2 && !name.startsWith('--') ? name.slice(0, 2) : name, kind });
    }
  }
  return listed;
}

describe('the git allow-list', { skip: needs('git') }, () => {
  const work = realpathSync(mkdtempSync(path.join(tmpdir(), 'ccp-cli-git-allow-list-')));
  const repo = path.join(work, 'repo');
  const secret = path.join(work, 'secret.txt');
  const pwned = path.join(work, 'pwned');
  const call = (): GitCall => ({
    cwd: repo,
    root: repo,
    remotes: new Map([
      ['origin', { fetchUrl: 'ssh://127.0.0.1:1/x.git', pushUrl: 'ssh://127.0.0.1:1/x.git' }],
    ]),
    signing: false,
    scratch: mkdtempSync(path.join(work, 'scratch-')),
  });

  before(() => {
    mkdirSync(repo);
    writeFileSync(secret, 'the-laptop-secret\n');
    const git = (...args: string[]) => execFileSync('git', args, { cwd: repo, stdio: 'ignore' });
    git('init', '-q', '-b', 'main');
    git('config', 'user.name', 't');
    git('config', 'user.email', 't@e');
    writeFileSync(path.join(repo, 'a.txt'), 'a\n');
    git('add', '.');
    git('commit', '-qm', 'one');
    writeFileSync(path.join(repo, 'a.txt'), 'b\n');
    git('commit', '-qam', 'two');
    git('remote', 'add', 'origin', 'ssh://127.0.0.1:1/x.git');
    // Traps: programs git could be made to run from the folder, and ways out of it to the secret.
    for (const name of ['git-merge-x/evil', 'evil', 'git-upload-pack-evil']) {
      mkdirSync(path.dirname(path.join(repo, name)), { recursive: true });
      writeFileSync(path.join(repo, name), `#!/bin/sh\necho "${name} $*" >>'${pwned}'\n`);
      chmodSync(path.join(repo, name), 0o755);
    }
    symlinkSync(secret, path.join(repo, 'link'));
    mkdirSync(path.join(repo, 'd'));
    symlinkSync('..', path.join(repo, 'd', 'up'));
    symlinkSync('up/../secret.txt', path.join(repo, 'd', 'key'));
    writeFileSync(path.join(repo, 'd', 'secret.txt'), 'a decoy\n');
  });

  after(() => rmSync(work, { recursive: true, force: true }));

  it("takes each option git lists only from the allow-list, with git's own way of taking a value", () => {
    let checked = 0;
    const mismatched: string[] = [];
    for (const command of GIT_SUBCOMMANDS) {
      const rule = gitSubcommand(command);
      assert.ok(rule?.reason, `${command} has a reason`);
      for (const { name, kind } of listedOptions(command)) {
        checked++;
        const option = rule?.options.get(name);
        if (option) {
          assert.ok(option.reason.length > 10, `git ${command} ${name} has a reason`);
          const clash =
            (kind === 'separate' && option.value !== 'required') ||
            (kind === 'none' && option.value === 'required') ||
            (kind === 'attached' && option.value === 'none') ||
            (kind === 'optional' && option.value === 'required');
          if (clash) mismatched.push(`git ${command} ${name}: git ${kind}, allow-list ${option.value}`);
          continue;
        }
        const given: string =
          kind === 'none' || kind === 'optional' ? name : name.startsWith('--') ? `${name}=x` : `${name}x`;
        const verdict = checkGitArguments([command, given], call());
        assert.equal(typeof verdict, 'string', `git ${command} ${given} is refused`);
        assert.ok(
          (verdict as string).includes(`git ${command} ${name}`),
          `the refusal names ${name}: ${verdict}`,
        );
      }
    }
    assert.deepEqual(mismatched, []);
    assert.ok(checked > 400, `${checked} options checked`);
  });

  it('refuses what runs a program or opens a file, on every command git takes it', () => {
    const dangerous = [
      '--exec=evil',
      '--upload-pack=evil',
      '--receive-pack=evil',
      '--stdin-paths',
      '--pathspec-from-file=x',
      '--ext-diff',
      '--textconv',
      '--output=x',
      '--no-index',
      '--open-files-in-pager=evil',
      '--interactive',
      '--edit-todo',
      '--batch-all-objects',
      '--follow-symlinks',
      '--file=x',
      '--global',
      '--recurse-submodules',
      '--trailer=x',
      '--force',
      '--mirror',
      '--delete',
      '--set-upstream',
    ];
    // A stopped sequence goes on with what it saved in .git (its strategy among it), which the workspace writes.
    for (const command of ['cherry-pick', 'revert', 'rebase']) {
      for (const option of ['--continue', '--skip', '--edit-todo', '--exec=evil', '-i']) {
        const verdict = checkGitArguments([command, ...option.split(' ')], call());
        assert.equal(typeof verdict, 'string', `git ${command} ${option} is refused`);
      }
    }
    assert.equal(typeof checkGitArguments(['rebase', '-x', './evil'], call()), 'string');
    for (const command of GIT_SUBCOMMANDS) {
      for (const option of dangerous) {
        const name = option.split('=')[0] ?? option;
        // Where these are harmless by design.
        if (
          ['--force', '--delete'].includes(name) &&
          ['branch', 'tag', 'add', 'rm', 'mv', 'checkout', 'switch', 'clean', 'fetch'].includes(command)
        )
          continue;
        if (name === '--interactive' && command === 'add') continue;
        if (name === '--file' && ['commit', 'tag', 'merge'].includes(command)) continue;
        if (name === '--no-index' && command === 'check-ignore') continue;
        const verdict = checkGitArguments([command, option, 'HEAD'], call());
        assert.equal(typeof verdict, 'string', `git ${command} ${option} is refused`);
      }
    }
  });

  it('generated calls run nothing from the folder and read nothing outside it', async () => {
    const context: PolicyContext = {
      root: repo,
      git: await prepareGit(false),
      remotes: new Map([[repo, call().remotes]]),
      mirrors: mkdtempSync(path.join(work, 'mirrors-')),
    };
    let seed = 25;
    const random = (below: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % below;
    };
    const pick = <T>(list: readonly T[]) => list[random(list.length)] as T;
    const values = [
      'x/evil',
      'evil',
      './evil',
      'ort',
      'ours',
      'link',
      'd/key',
      'd/up/../secret.txt',
      secret,
      '../secret.txt',
      '-',
      'HEAD',
      'HEAD~1',
      'main',
      'origin',
      'a.txt',
      '--exec=./evil',
      '-c',
      'core.pager=./evil',
      'x',
      `ssh://127.0.0.1:1/${'y'}`,
      'ext::./evil',
      '+refs/*:refs/heads/*',
      ':main',
    ];
    const stdins = ['', `${secret}\n`, 'link\n', 'd/key\n', 'HEAD\n', 'q\n'];
    let ran = 0;
    for (let round = 0; round < 250; round++) {
      const command = random(2)
        ? pick(GIT_SUBCOMMANDS)
        : pick([
            'cherry-pick',
            'revert',
            'merge',
            'rebase',
            'commit',
            'blame',
            'hash-object',
            'grep',
            'diff',
            'fetch',
            'push',
          ]);
      const known = [...(gitSubcommand(command)?.options.keys() ?? [])];
      const args: string[] = [command];
      for (let count = random(4); count >= 0; count--) {
        const choice = random(6);
        if (choice === 0) args.push(pick(values));
        else if (choice === 1) args.push(`${pick(known)}=${pick(values)}`);
        else if (choice === 2)
          args.push(
            pick([
              '--strategy',
              '-s',
              '-X',
              '-F',
              '--contents',
              '--stdin-paths',
              '--upload-pack',
              '-c',
              '--exec',
              '--output',
              '--no-index',
            ]),
            pick(values),
          );
        else args.push(pick(known), ...(random(2) ? [pick(values)] : []));
      }
      const verdict = await commandPolicy('git', args, repo, context);
      if (!verdict.run) continue;
      ran++;
      const result = spawnSync('git', verdict.args, {
        cwd: repo,
        env: verdict.env,
        input: verdict.stdin ? pick(stdins) : undefined,
        encoding: 'utf8',
        timeout: 20_000,
      });
      verdict.cleanup();
      const said = `${result.stdout}${result.stderr}`;
      assert.doesNotMatch(said, /the-laptop-secret/, `git ${args.join(' ')} printed the secret`);
      assert.equal(
        existsSync(pwned),
        false,
        `git ${args.join(' ')} ran ${existsSync(pwned) ? readFileSync(pwned, 'utf8') : ''}`,
      );
      const blob = execFileSync('git', ['hash-object', '--stdin'], { input: 'the-laptop-secret\n' })
        .toString()
        .trim();
      assert.notEqual(
        spawnSync('git', ['cat-file', '-e', blob], { cwd: repo }).status,
        0,
        `git ${args.join(' ')} stored the secret`,
      );
    }
    assert.ok(ran > 40, `${ran} generated calls ran`);
  });

  it('every option that takes a value, given each trap, yields no program of the folder and no path out of it', () => {
    const traps = ['x/evil', './evil', 'd/key', 'link', 'd/up/../secret.txt', secret, '../secret.txt'];
    let accepted = 0;
    for (const command of GIT_SUBCOMMANDS) {
      const rule = gitSubcommand(command);
      for (const [name, option] of rule?.options ?? []) {
        if (option.value === 'none') continue;
        for (const trap of traps) {
          const each = call();
          const checked = checkGitArguments(
            [command, name.startsWith('--') ? `${name}=${trap}` : `${name}${trap}`, 'HEAD'],
            each,
          );
          if (typeof checked === 'string') continue;
          accepted++;
          for (const arg of checked.rest) {
            const [spelled, value]: [string, string] = arg.startsWith('--')
              ? [arg.split('=')[0] ?? arg, arg.includes('=') ? arg.slice(arg.indexOf('=') + 1) : arg]
              : [arg.slice(0, 2), arg.slice(2)];
            const taken = rule?.options.get(spelled);
            if (taken?.check === 'strategy')
              assert.ok(BUILT_IN_STRATEGIES.includes(value), `git ${command} ${arg}`);
            for (const named of [arg, value]) {
              if (named.startsWith(each.scratch)) {
                assert.doesNotMatch(
                  readFileSync(named, 'utf8'),
                  /the-laptop-secret/,
                  `git ${command} ${arg}`,
                );
                continue;
              }
              const where = path.isAbsolute(named) ? named : `${repo}/${named}`;
              if (!existsSync(where)) continue;
              assert.ok(
                realpathSync.native(where).startsWith(`${repo}/`),
                `git ${command} ${arg} leads out of the folder`,
              );
            }
          }
        }
      }
    }
    assert.ok(accepted > 500, `${accepted} accepted`);
  });

  it('fetches, pulls, pushes and lists the recorded remote, by name, over ssh', async () => {
    const bare = path.join(work, 'remote.git');
    execFileSync('git', ['clone', '-q', '--bare', repo, bare]);
    const sshd = await startLocalSshd({ PATH: process.env.PATH, HOME: work });
    const saved = process.env.GIT_SSH_COMMAND;
    process.env.GIT_SSH_COMMAND = `ssh -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -p ${sshd.port}`;
    try {
      const url = `ssh://u@127.0.0.1${bare}`;
      const context: PolicyContext = {
        root: repo,
        git: await prepareGit(false),
        remotes: new Map([[repo, new Map([['origin', { fetchUrl: url, pushUrl: url }]])]]),
        mirrors: mkdtempSync(path.join(work, 'mirrors-')),
      };
      const proxied = async (...args: string[]) => {
        const verdict = await commandPolicy('git', args, repo, context);
        assert.ok(verdict.run, verdict.run ? '' : verdict.reason);
        try {
          const { stdout } = await run('git', verdict.args, { cwd: repo, env: verdict.env, timeout: 20_000 });
          return stdout;
        } catch (error) {
          assert.fail(`git ${args.join(' ')}: ${(error as { stderr?: string }).stderr}`);
        } finally {
          verdict.cleanup();
        }
      };
      await proxied('fetch', 'origin');
      const tip = execFileSync('git', ['rev-parse', 'refs/remotes/origin/main'], { cwd: repo })
        .toString()
        .trim();
      assert.equal(tip, execFileSync('git', ['rev-parse', 'main'], { cwd: bare }).toString().trim());
      execFileSync('git', ['checkout', '-qfB', 'feature', 'origin/main'], { cwd: repo });
      execFileSync('git', ['commit', '-q', '--allow-empty', '-m', 'pushed'], { cwd: repo });
      await proxied('push', 'origin', 'feature');
      assert.match(
        execFileSync('git', ['log', '-1', '--format=%s', 'feature'], { cwd: bare }).toString(),
        /pushed/,
      );
      assert.match(await proxied('ls-remote', 'origin'), /refs\/heads\/feature/);
      await proxied('pull', '--ff-only', 'origin', 'feature');
    } finally {
      if (saved === undefined) delete process.env.GIT_SSH_COMMAND;
      else process.env.GIT_SSH_COMMAND = saved;
      sshd.close();
    }
  });
});
