import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { isInside } from './folder-paths.js';
import { checkGitArguments, type RecordedRemote } from './git-arguments.js';
import {
  type GitSetup,
  gitEnvironment,
  gitOverrides,
  isPassedToCommands,
  parseConfigList,
} from './git-environment.js';

/*
 * What a command the workspace asks for may do on this machine. The workspace is not trusted (its user may be
 * root): it picks the arguments and stdin and can write anything in the mounted folder, the repository's .git
 * among it. git runs from an allow-list (git-allow-list.ts) in a fixed environment (git-environment.ts); any
 * other command the user listed in proxy_commands runs with the arguments given, as docs/cli.md says: listing
 * it is the user's choice to let the workspace run it.
 */

export type Verdict =
  | {
      run: true;
      args: string[];
      env: NodeJS.ProcessEnv;
      /** Whether the workspace's stdin reaches the command. */
      stdin: boolean;
      /** Removes what the check made for this run (copies of files git reads). */
      cleanup: () => void;
    }
  | { run: false; reason: string };

/** What ccp learnt on this machine when it started, before the workspace could change anything. */
export interface PolicyContext {
  /** The mounted folder, resolved. */
  root: string;
  git: GitSetup;
  /** The remotes of the repositories in the folder, by their work tree's resolved path. */
  remotes: ReadonlyMap<string, ReadonlyMap<string, RecordedRemote>>;
  /** ccp's own folder for the object folders it hands git (see objectMirror). */
  mirrors: string;
}

export async function commandPolicy(
  name: string,
  args: readonly string[],
  /** The caller's working directory here, resolved, inside the folder. */
  cwd: string,
  context: PolicyContext,
): Promise<Verdict> {
  if (name !== 'git') {
    const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => isPassedToCommands(key)));
    return { run: true, args: [...args], env, stdin: true, cleanup: () => {} };
  }
  return gitPolicy(args, cwd, context);
}

const run = promisify(execFile);

/**
 * Settings of the repository's own configuration that no `-c` undoes (the name carries a driver, a remote or
 * a URL of the workspace's choosing; drivers are picked in .gitattributes) and what they would do here: a
 * repository that sets one is refused.
 */
const UNSAFE_SETTINGS: [RegExp, string][] = [
  [
    /^(filter\..+\.(clean|smudge|process)|diff\..+\.(textconv|command)|merge\..+\.driver|trailer\..+\.(cmd|command))$/i,
    'a program git would run on your machine',
  ],
  [
    /^lfs\.(customtransfer\..+\.path|extension\..+\.(clean|smudge))$/i,
    'a program git-lfs would run on your machine',
  ],
  [
    /^(http\.(.+\.)?(sslverify|sslcainfo|sslcapath|sslbackend|proxy|curloptresolve|cookiefile|sslcert|sslkey)|remote\..+\.proxy|url\..+\.(insteadof|pushinsteadof))$/i,
    'where your credentials go, or a file of yours sent with them',
  ],
];

async function gitPolicy(args: readonly string[], cwd: string, context: PolicyContext): Promise<Verdict> {
  const env = gitEnvironment(context.git);
  // Asked by tools to find out whether git is there; it reads no repository.
  if (args.length === 1 && (args[0] === '--version' || args[0] === 'version')) {
    return { run: true, args: ['version'], env, stdin: false, cleanup: () => {} };
  }
  const overrides = gitOverrides(context.git).flatMap((setting) => ['-c', setting]);
  const repository = await locateRepository(cwd, context.root, env, overrides);
  if (typeof repository === 'string') return { run: false, reason: repository };
  // Pinned: a `.git` or core.worktree the workspace changes from now on does not move git elsewhere.
  env.GIT_DIR = repository.gitDir;
  env.GIT_WORK_TREE = repository.top;
  const objects = objectMirror(repository.commonDir, context.mirrors);
  if (typeof objects === 'string') return { run: false, reason: objects };
  env.GIT_OBJECT_DIRECTORY = objects.folder;
  const unsafe = await unsafeSetting(cwd, env);
  if (unsafe) return { run: false, reason: unsafe };
  const scratch = mkdtempSync(path.join(tmpdir(), 'ccp-git-call-'));
  const cleanup = () => rmSync(scratch, { recursive: true, force: true });
  const checked = checkGitArguments(args, {
    cwd,
    root: context.root,
    remotes: context.remotes.get(repository.top) ?? new Map(),
    signing: context.git.signing,
    scratch,
  });
  if (typeof checked === 'string') {
    cleanup();
    return { run: false, reason: checked };
  }
  const transfer = TRANSFER_PROGRAM[checked.command];
  return {
    run: true,
    args: [
      '--no-pager',
      ...overrides,
      ...checked.global,
      checked.command,
      ...(transfer ? [transfer] : []),
      ...checked.rest,
    ],
    env,
    stdin: checked.stdin,
    cleanup,
  };
}

/** What the transfer runs on the other side, whatever the repository's configuration says. */
const TRANSFER_PROGRAM: Record<string, string> = {
  fetch: '--upload-pack=git-upload-pack',
  pull: '--upload-pack=git-upload-pack',
  'ls-remote': '--upload-pack=git-upload-pack',
  push: '--receive-pack=git-receive-pack',
};

/** The repository's work tree and git directories, refused unless all are inside the mounted folder. */
async function locateRepository(
  cwd: string,
  root: string,
  env: NodeJS.ProcessEnv,
  overrides: string[],
): Promise<{ top: string; gitDir: string; commonDir: string } | string> {
  let lines: string[];
  try {
    const { stdout } = await run(
      'git',
      [
        ...overrides,
        'rev-parse',
        '--path-format=absolute',
        '--show-toplevel',
        '--git-dir',
        '--git-common-dir',
      ],
      { cwd, env },
    );
    lines = stdout.split('\n');
  } catch (error) {
    return `git runs on your machine only in a repository's work tree: ${firstLine(error)}`;
  }
  const [top = '', gitDir = '', commonDir = ''] = lines.map((where) => {
    try {
      return realpathNative(where);
    } catch {
      return where;
    }
  });
  for (const where of [top, gitDir, commonDir]) {
    if (!isInside(where, root)) {
      return `the repository (${where}) is not inside the mounted folder; run git on your machine`;
    }
  }
  if (existsSync(path.join(commonDir, 'objects', 'info', 'alternates'))) {
    return 'the repository borrows objects from another one (objects/info/alternates); run git on your machine';
  }
  return { top, gitDir, commonDir };
}

const realpathNative = (where: string) => realpathSync.native(where);

/**
 * The object folder git is given: one of ccp's own, whose `info` (where git reads `alternates`, the list of
 * other repositories to borrow objects from) is ccp's and empty, and whose other entries link to the
 * repository's own. A list the workspace writes into the repository later is never read.
 */
function objectMirror(commonDir: string, mirrors: string): { folder: string } | string {
  const objects = path.join(commonDir, 'objects');
  const mirror = path.join(mirrors, createHash('sha256').update(objects).digest('hex').slice(0, 32));
  if (existsSync(path.join(mirror, 'pack'))) return { folder: mirror };
  try {
    mkdirSync(path.join(mirror, 'info'), { recursive: true, mode: 0o700 });
    // Every fan-out folder exists first: one git made in the mirror would hold objects the repository lacks.
    for (let byte = 0; byte < 256; byte++) {
      const name = byte.toString(16).padStart(2, '0');
      mkdirSync(path.join(objects, name), { recursive: true });
      symlinkSync(path.join(objects, name), path.join(mirror, name));
    }
    mkdirSync(path.join(objects, 'pack'), { recursive: true });
    symlinkSync(path.join(objects, 'pack'), path.join(mirror, 'pack'));
  } catch (error) {
    rmSync(mirror, { recursive: true, force: true });
    return `ccp could not prepare the repository's objects for git (${(error as Error).message})`;
  }
  return { folder: mirror };
}

/** The first setting of the repository's own configuration that no `-c` undoes, as a refusal. */
async function unsafeSetting(cwd: string, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  let listed: string;
  try {
    ({ stdout: listed } = await run('git', ['config', '--list', '--show-scope', '--includes', '-z'], {
      cwd,
      env,
    }));
  } catch (error) {
    return `git could not read the repository's configuration: ${firstLine(error)}`;
  }
  for (const entry of parseConfigList(listed)) {
    if (entry.scope === 'global') continue;
    const unsafe = UNSAFE_SETTINGS.find(([key]) => key.test(entry.key));
    if (unsafe) {
      return (
        `the repository's configuration sets ${entry.key}, ${unsafe[1]}; ` +
        'set it in your global git configuration instead, or run git on your machine'
      );
    }
  }
  return undefined;
}

/**
 * The remotes of the repositories at `folder` and in its folders one level down, as they are on this machine
 * (names, and the URLs git would use for them, `insteadOf` applied), by the repository's resolved work tree.
 */
export async function recordRemotes(folder: string): Promise<Map<string, Map<string, RecordedRemote>>> {
  const recorded = new Map<string, Map<string, RecordedRemote>>();
  const children = readdirSync(folder, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(path.join(folder, entry.name, '.git')))
    .map((entry) => path.join(folder, entry.name));
  for (const repository of [folder, ...children]) {
    const git = async (...args: string[]) => (await run('git', args, { cwd: repository })).stdout.trim();
    try {
      const top = realpathNative(await git('rev-parse', '--show-toplevel'));
      if (recorded.has(top)) continue;
      const remotes = new Map<string, RecordedRemote>();
      for (const name of (await git('remote')).split('\n').filter(Boolean)) {
        const fetchUrl = await git('remote', 'get-url', name);
        const pushUrl = await git('remote', 'get-url', '--push', name);
        // A URL read as an option would be one; such a remote is left out.
        if (fetchUrl.startsWith('-') || pushUrl.startsWith('-')) continue;
        remotes.set(name, { fetchUrl, pushUrl });
      }
      recorded.set(top, remotes);
    } catch {
      // Not a repository: its git calls reach no remote.
    }
  }
  return recorded;
}

function firstLine(error: unknown): string {
  const stderr = (error as { stderr?: unknown }).stderr;
  const text = typeof stderr === 'string' && stderr.trim() ? stderr : String(error);
  return text.trim().split('\n')[0] ?? '';
}
