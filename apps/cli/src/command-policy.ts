import { execFile } from 'node:child_process';
import { existsSync, lstatSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

/*
 * What a command the workspace asks for may do on this machine. The workspace is not trusted (its user may be
 * root): it picks the arguments and can write anything in the mounted folder, the repository's .git among it.
 * git has a policy; any other command the user listed in proxy_commands runs with the arguments given, as
 * docs/cli.md says: listing it is the user's choice to let the workspace run it.
 */

export type Verdict = { run: true; args: string[]; env: NodeJS.ProcessEnv } | { run: false; reason: string };

export async function commandPolicy(
  name: string,
  args: readonly string[],
  /** The caller's working directory here, resolved, inside `root`. */
  cwd: string,
  /** The mounted folder, resolved. */
  root: string,
): Promise<Verdict> {
  if (name !== 'git') return { run: true, args: [...args], env: process.env };
  return gitPolicy(args, cwd, root);
}

const run = promisify(execFile);

/** Options before the git command that change nothing but output and pathspec matching. */
const GLOBAL_OPTIONS = new Set([
  '--no-pager',
  '-P',
  '--literal-pathspecs',
  '--glob-pathspecs',
  '--noglob-pathspecs',
  '--icase-pathspecs',
  '--no-optional-locks',
  '--no-replace-objects',
]);

/**
 * The git commands worth running with the user's credentials, keys and files. All are builtins, which an
 * alias cannot replace (so a repository's `alias.x = !cmd` never runs). Left out, among others: rebase (its
 * todo list, writable by the workspace, runs `exec` lines), config (writes ~/.gitconfig), submodule,
 * worktree, clone, init, am, apply, bisect, archive, bundle, format-patch, difftool, mergetool, help.
 */
const SUBCOMMANDS = new Set([
  'add',
  'blame',
  'branch',
  'cat-file',
  'check-ignore',
  'checkout',
  'cherry',
  'cherry-pick',
  'clean',
  'commit',
  'describe',
  'diff',
  'diff-files',
  'diff-index',
  'diff-tree',
  'fetch',
  'for-each-ref',
  'grep',
  'hash-object',
  'log',
  'ls-files',
  'ls-remote',
  'ls-tree',
  'merge',
  'merge-base',
  'mv',
  'name-rev',
  'pull',
  'push',
  'reflog',
  'remote',
  'reset',
  'restore',
  'rev-list',
  'rev-parse',
  'revert',
  'rm',
  'shortlog',
  'show',
  'show-ref',
  'stash',
  'status',
  'switch',
  'symbolic-ref',
  'tag',
]);

/** Long options refused for every command (git takes any unambiguous abbreviation of them too). */
const REFUSED_OPTIONS: Record<string, string> = {
  '--help': 'it opens a manual viewer or a browser on your machine (-h prints the usage)',
  '--output': 'it writes a file on your machine',
  '--ext-diff': 'it runs a diff program',
  '--no-index': 'it compares files outside the repository',
  '--recurse-submodules': 'it runs git in submodules, whose own configuration ccp does not check',
  '--submodule': 'it runs git in submodules, whose own configuration ccp does not check',
  '--upload-pack': 'it names the program run for the transfer',
  '--receive-pack': 'it names the program run for the transfer',
  '--exec': 'it names a program to run',
};

/** Options refused for one command: long ones, and letters of short ones. */
const REFUSED_BY_COMMAND: Record<string, { long?: Record<string, string>; short?: Record<string, string> }> =
  {
    // Each remote would be fetched by a git of its own, without the --upload-pack given below.
    fetch: { long: { '--all': 'name one remote', '--multiple': 'name one remote' } },
    pull: { long: { '--all': 'name one remote' } },
    grep: {
      long: { '--open-files-in-pager': 'it runs a pager program' },
      short: { O: 'it runs a pager program' },
    },
    'ls-remote': { short: { u: 'it names the program run for the transfer' } },
  };

/** What the transfer runs on the other side, whatever the repository's remote.<name>.uploadpack says. */
const TRANSFER_PROGRAM: Record<string, string> = {
  fetch: '--upload-pack=git-upload-pack',
  pull: '--upload-pack=git-upload-pack',
  'ls-remote': '--upload-pack=git-upload-pack',
  push: '--receive-pack=git-receive-pack',
};

/**
 * Settings of the repository's own configuration that no `-c` undoes (the name carries a driver, a remote or
 * a URL of the workspace's choosing; drivers are picked in .gitattributes) and what they would do here: a
 * repository that sets one is refused.
 */
const UNSAFE_SETTINGS: [RegExp, string][] = [
  [
    /^(filter\..+\.(clean|smudge|process)|diff\..+\.(textconv|command)|diff\.external|merge\..+\.driver)$/i,
    'a program git would run on your machine',
  ],
  [/^remote\..+\.(uploadpack|receivepack)$/i, 'the program run for a transfer'],
  [
    /^lfs\.(customtransfer\..+\.path|extension\..+\.(clean|smudge))$/i,
    'a program git-lfs would run on your machine',
  ],
  [
    /^(http\.(.+\.)?(sslverify|sslcainfo|sslcapath|sslbackend|proxy|curloptresolve)|remote\..+\.proxy)$/i,
    'where your credentials go over HTTPS',
  ],
];

/** Variables of this machine's environment kept for git: the user's own SSH command and password prompt. */
const KEPT_GIT_VARIABLES = new Set(['GIT_SSH_COMMAND', 'GIT_ASKPASS']);

async function gitPolicy(args: readonly string[], cwd: string, root: string): Promise<Verdict> {
  // Asked by tools to find out whether git is there; it reads no repository.
  if (args.length === 1 && (args[0] === '--version' || args[0] === 'version')) {
    return { run: true, args: ['version'], env: gitEnvironment() };
  }
  const parsed = checkArguments(args, cwd, root);
  if (typeof parsed === 'string') return { run: false, reason: parsed };
  const env = gitEnvironment();
  const repository = await locateRepository(cwd, root, env);
  if (typeof repository === 'string') return { run: false, reason: repository };
  // Pinned: a `.git` or core.worktree the workspace changes from now on does not move git elsewhere.
  env.GIT_DIR = repository.gitDir;
  env.GIT_WORK_TREE = repository.top;
  const config = await readConfig(cwd, env);
  if (typeof config === 'string') return { run: false, reason: config };
  for (const entry of config) {
    if (entry.scope === 'system' || entry.scope === 'global') continue;
    const unsafe = UNSAFE_SETTINGS.find(([key]) => key.test(entry.key));
    if (unsafe) {
      return {
        run: false,
        reason:
          `the repository's configuration sets ${entry.key}, ${unsafe[1]}; ` +
          'set it in your global git configuration instead, or run git on your machine',
      };
    }
  }
  const transfer = TRANSFER_PROGRAM[parsed.command];
  return {
    run: true,
    args: [
      '--no-pager',
      ...overrides(config).flatMap((setting) => ['-c', setting]),
      ...parsed.global,
      parsed.command,
      ...(transfer ? [transfer] : []),
      ...parsed.rest,
    ],
    env,
  };
}

/** The git command and its arguments, or why they are refused. */
function checkArguments(
  args: readonly string[],
  cwd: string,
  root: string,
): { global: string[]; command: string; rest: string[] } | string {
  let at = 0;
  for (; at < args.length && args[at]?.startsWith('-'); at++) {
    if (!GLOBAL_OPTIONS.has(args[at] ?? '')) {
      return (
        `git option ${args[at]} is refused: options before the git command change its configuration, ` +
        'repository or programs; run it on your machine'
      );
    }
  }
  const command = args[at];
  if (command === undefined) return 'no git command given';
  if (!SUBCOMMANDS.has(command)) {
    const allowed = [...SUBCOMMANDS].join(', ');
    return `git ${command} is not run on your machine from the workspace; it runs: ${allowed}`;
  }
  const rest = args.slice(at + 1);
  const refused = { ...REFUSED_OPTIONS, ...REFUSED_BY_COMMAND[command]?.long };
  const letters = REFUSED_BY_COMMAND[command]?.short ?? {};
  // Checked after `--` too: an option that takes the next argument as its value (`--grep --`) would make it
  // look like the end of the options while git reads what follows as options.
  for (const arg of rest) {
    if (arg.startsWith('--')) {
      const name = arg.split('=', 1)[0] ?? arg;
      const match = Object.keys(refused).find((option) => name.length > 2 && option.startsWith(name));
      if (match) return `git option ${arg} is refused: ${refused[match]}`;
    } else if (arg.startsWith('-')) {
      const letter = Object.keys(letters).find((each) => arg.includes(each));
      if (letter) return `git option ${arg} is refused: ${letters[letter]}`;
    }
    const outside = pathOutside(arg, cwd, root);
    if (outside) return `git argument ${arg} names ${outside}, outside the mounted folder`;
  }
  if (command === 'remote') {
    // Listing only: its other forms reach a remote without the transfer program given above, or change it.
    const words = rest.filter((arg) => !arg.startsWith('-'));
    if (words.length > 0 && words[0] !== 'get-url')
      return `git remote ${words[0]} is not run on your machine`;
  }
  return { global: args.slice(0, at), command, rest };
}

/**
 * The path outside `root` that an argument names (itself, an option's value, or what follows a short
 * option's letters), as git would open it here: through links. A file the workspace made can be such a link.
 */
function pathOutside(arg: string, cwd: string, root: string): string | undefined {
  const candidates = [arg];
  if (arg.startsWith('--') && arg.includes('=')) candidates.push(arg.slice(arg.indexOf('=') + 1));
  else if (arg.startsWith('-')) for (let at = 2; at < arg.length; at++) candidates.push(arg.slice(at));
  for (const candidate of candidates) {
    if (candidate === '') continue;
    const named = path.resolve(cwd, candidate);
    try {
      lstatSync(named);
    } catch {
      continue; // names nothing: a revision, a message, a pattern
    }
    let real: string;
    try {
      real = realpathSync(named);
    } catch {
      return named; // a link to nowhere: where it leads cannot be checked
    }
    if (!inside(real, root)) return named;
  }
  return undefined;
}

const inside = (real: string, root: string) => real === root || real.startsWith(`${root}${path.sep}`);

/**
 * This machine's environment without its GIT_* variables (they could point git at another repository or
 * configuration), and none of the workspace's (the protocol carries none), with prompts and editors off.
 */
function gitEnvironment(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!name.startsWith('GIT_') || KEPT_GIT_VARIABLES.has(name)) env[name] = value;
  }
  return { ...env, GIT_TERMINAL_PROMPT: '0', GIT_EDITOR: ':', GIT_SEQUENCE_EDITOR: ':', GIT_PAGER: 'cat' };
}

/** The repository's work tree and git directory, refused unless both are inside the mounted folder. */
async function locateRepository(
  cwd: string,
  root: string,
  env: NodeJS.ProcessEnv,
): Promise<{ top: string; gitDir: string } | string> {
  let lines: string[];
  try {
    const { stdout } = await run(
      'git',
      ['rev-parse', '--path-format=absolute', '--show-toplevel', '--git-dir', '--git-common-dir'],
      { cwd, env },
    );
    lines = stdout.split('\n');
  } catch (error) {
    return `git runs on your machine only in a repository's work tree: ${firstLine(error)}`;
  }
  const [top = '', gitDir = '', commonDir = ''] = lines.map((where) => {
    try {
      return realpathSync(where);
    } catch {
      return where;
    }
  });
  for (const where of [top, gitDir, commonDir]) {
    if (!inside(where, root)) {
      return `the repository (${where}) is not inside the mounted folder; run git on your machine`;
    }
  }
  // Objects borrowed from another repository, which the workspace could then list and read.
  if (existsSync(path.join(commonDir, 'objects', 'info', 'alternates'))) {
    return 'the repository borrows objects from another one (objects/info/alternates); run git on your machine';
  }
  return { top, gitDir };
}

interface ConfigEntry {
  scope: string;
  key: string;
  /** null for a key set without `=` (true). */
  value: string | null;
}

async function readConfig(cwd: string, env: NodeJS.ProcessEnv): Promise<ConfigEntry[] | string> {
  let listed: string;
  try {
    ({ stdout: listed } = await run('git', ['config', '--list', '--show-scope', '--includes', '-z'], {
      cwd,
      env,
    }));
  } catch (error) {
    return `git could not read the repository's configuration: ${firstLine(error)}`;
  }
  const fields = listed.split('\0');
  const entries: ConfigEntry[] = [];
  for (let at = 0; at + 1 < fields.length; at += 2) {
    const entry = fields[at + 1] ?? '';
    const newline = entry.indexOf('\n');
    entries.push({
      scope: fields[at] ?? '',
      key: newline < 0 ? entry : entry.slice(0, newline),
      value: newline < 0 ? null : entry.slice(newline + 1),
    });
  }
  return entries;
}

/**
 * `-c` settings, which git reads after the repository's configuration: those that run a program take the
 * user's own value (system or global configuration) or one that runs nothing.
 */
function overrides(config: readonly ConfigEntry[]): string[] {
  const own = config.filter((entry) => entry.scope === 'system' || entry.scope === 'global');
  const ownValue = (...keys: string[]) =>
    own.filter((entry) => keys.includes(entry.key.toLowerCase()) && entry.value !== null).at(-1)?.value;
  const setting = (key: string, value: string | null) => (value === null ? key : `${key}=${value}`);
  return [
    'core.fsmonitor=',
    'core.hooksPath=/dev/null',
    'core.pager=cat',
    'core.editor=:',
    'sequence.editor=:',
    'interactive.diffFilter=',
    `core.sshCommand=${ownValue('core.sshcommand') ?? 'ssh'}`,
    // Unset, git would ask SSH_ASKPASS next; an empty value would skip it.
    `core.askPass=${ownValue('core.askpass') ?? process.env.SSH_ASKPASS ?? ''}`,
    `commit.template=${ownValue('commit.template') ?? ''}`,
    // Last wins between the two names of the OpenPGP program.
    `gpg.program=${ownValue('gpg.program', 'gpg.openpgp.program') ?? 'gpg'}`,
    `gpg.x509.program=${ownValue('gpg.x509.program') ?? 'gpgsm'}`,
    `gpg.ssh.program=${ownValue('gpg.ssh.program') ?? 'ssh-keygen'}`,
    `gpg.ssh.defaultKeyCommand=${ownValue('gpg.ssh.defaultkeycommand') ?? ''}`,
    // An empty helper drops every helper read so far (the repository's, per URL too); then the user's again.
    'credential.helper=',
    ...own
      .filter((entry) => /^credential\.(.+\.)?helper$/i.test(entry.key))
      .map((entry) => setting(entry.key, entry.value)),
    // ext:: runs a command; file:// and paths reach other repositories here; git:// may run core.gitProxy.
    'protocol.ext.allow=never',
    'protocol.file.allow=never',
    'protocol.git.allow=never',
    'submodule.recurse=false',
    'diff.submodule=short',
    'fetch.recurseSubmodules=false',
    'push.recurseSubmodules=no',
  ];
}

function firstLine(error: unknown): string {
  const stderr = (error as { stderr?: unknown }).stderr;
  const text = typeof stderr === 'string' && stderr.trim() ? stderr : String(error);
  return text.trim().split('\n')[0] ?? '';
}
