import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/*
 * What git runs with on this machine for the workspace: an environment built from an allow-list (nothing of
 * ccp's own, CCP_PASSWORD among them), no system configuration, a global configuration ccp writes from the
 * user's own (identity, credential helpers, and signing only when the user opted in), and `-c` settings,
 * which git reads last, that turn off whatever in the repository's configuration runs a program.
 */

/** Variables of this machine's environment that git and the programs it runs for the user need. */
const KEPT_VARIABLES = new Set([
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'LANG',
  'LANGUAGE',
  'TZ',
  'TMPDIR',
  // The user's SSH agent and key prompts, and their GnuPG.
  'SSH_AUTH_SOCK',
  'SSH_ASKPASS',
  'GIT_SSH_COMMAND',
  'GIT_ASKPASS',
  'DISPLAY',
  'WAYLAND_DISPLAY',
  'XDG_RUNTIME_DIR',
  'XDG_CONFIG_HOME',
  'GNUPGHOME',
  // How this machine reaches the network.
  'http_proxy',
  'https_proxy',
  'no_proxy',
  'all_proxy',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
  'ALL_PROXY',
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
]);

/** Settings of the user's own (system and global) configuration that ccp's global configuration carries. */
const OWN_SETTINGS =
  /^(user\.(name|email)|credential\..+|core\.(sshcommand|askpass|excludesfile|autocrlf|eol)|http\..+)$/i;
/** ... and with proxy_git_signing. */
const SIGNING_SETTINGS = /^(user\.signingkey|gpg\..+|commit\.gpgsign|tag\.(gpgsign|forcesignannotated))$/i;

export interface ConfigEntry {
  scope: string;
  key: string;
  /** null for a key set without `=` (true). */
  value: string | null;
}

/** Set once when ccp starts: the user's settings, read on this machine, and the configuration file made of them. */
export interface GitSetup {
  /** The file git reads as its global configuration. */
  globalConfig: string;
  own: ConfigEntry[];
  signing: boolean;
}

export function parseConfigList(listed: string): ConfigEntry[] {
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

/** Reads the user's own git configuration here, from a folder of ccp's (no repository's), and writes ccp's. */
export async function prepareGit(signing: boolean): Promise<GitSetup> {
  const folder = mkdtempSync(path.join(tmpdir(), 'ccp-git-'));
  process.once('exit', () => rmSync(folder, { recursive: true, force: true }));
  const env = { ...userEnvironment(), GIT_CEILING_DIRECTORIES: path.dirname(folder) };
  const own: ConfigEntry[] = [];
  for (const scope of ['--system', '--global']) {
    try {
      const { stdout } = await run('git', ['config', scope, '--list', '--show-scope', '--includes', '-z'], {
        cwd: folder,
        env,
      });
      own.push(...parseConfigList(stdout));
    } catch {
      // No such file: nothing set there.
    }
  }
  const globalConfig = path.join(folder, 'gitconfig');
  writeFileSync(globalConfig, '', { mode: 0o600 });
  for (const entry of own) {
    if (!OWN_SETTINGS.test(entry.key) && !(signing && SIGNING_SETTINGS.test(entry.key))) continue;
    await run('git', ['config', '--file', globalConfig, '--add', entry.key, entry.value ?? 'true'], { env });
  }
  return { globalConfig, own, signing };
}

function userEnvironment(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (KEPT_VARIABLES.has(name) || name.startsWith('LC_')) env[name] = value;
  }
  return env;
}

/** The environment of a git run for the workspace. */
export function gitEnvironment(setup: GitSetup): NodeJS.ProcessEnv {
  return {
    ...userEnvironment(),
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: setup.globalConfig,
    GIT_TERMINAL_PROMPT: '0',
    GIT_EDITOR: ':',
    GIT_SEQUENCE_EDITOR: ':',
    GIT_PAGER: 'cat',
  };
}

/** Whether an environment variable may reach a command other than git (ccp's own never do). */
export const isPassedToCommands = (name: string) => !name.startsWith('CCP_');

/**
 * `-c` settings for each run, read after the repository's configuration: what runs a program takes the user's
 * own value or one that runs nothing; transports are limited to https, http and ssh.
 */
export function gitOverrides(setup: GitSetup): string[] {
  const ownValue = (...keys: string[]) =>
    setup.own.filter((entry) => keys.includes(entry.key.toLowerCase()) && entry.value !== null).at(-1)?.value;
  const signing = setup.signing
    ? [
        `gpg.program=${ownValue('gpg.program', 'gpg.openpgp.program') ?? 'gpg'}`,
        `gpg.x509.program=${ownValue('gpg.x509.program') ?? 'gpgsm'}`,
        `gpg.ssh.program=${ownValue('gpg.ssh.program') ?? 'ssh-keygen'}`,
        `gpg.ssh.defaultKeyCommand=${ownValue('gpg.ssh.defaultkeycommand') ?? ''}`,
        `user.signingKey=${ownValue('user.signingkey') ?? ''}`,
        `commit.gpgSign=${ownValue('commit.gpgsign') ?? 'false'}`,
        `tag.gpgSign=${ownValue('tag.gpgsign') ?? 'false'}`,
      ]
    : [
        'gpg.program=false',
        'gpg.x509.program=false',
        'gpg.ssh.program=false',
        'gpg.ssh.defaultKeyCommand=',
        'commit.gpgSign=false',
        'tag.gpgSign=false',
        'tag.forceSignAnnotated=false',
        'push.gpgSign=false',
      ];
  return [
    'core.fsmonitor=false',
    'core.hooksPath=/dev/null',
    'core.pager=cat',
    'core.editor=:',
    'sequence.editor=:',
    'interactive.diffFilter=',
    'diff.external=',
    `core.sshCommand=${ownValue('core.sshcommand') ?? 'ssh'}`,
    // Unset, git would ask SSH_ASKPASS next; an empty value would skip it.
    `core.askPass=${ownValue('core.askpass') ?? process.env.SSH_ASKPASS ?? ''}`,
    `core.excludesFile=${ownValue('core.excludesfile') ?? '/dev/null'}`,
    'core.attributesFile=/dev/null',
    'commit.template=',
    'mailmap.file=',
    ...signing,
    // An empty helper drops every helper read so far (the repository's, per URL too); then the user's again.
    'credential.helper=',
    ...setup.own
      .filter((entry) => /^credential\.(.+\.)?helper$/i.test(entry.key))
      .map((entry) => (entry.value === null ? entry.key : `${entry.key}=${entry.value}`)),
    'protocol.allow=never',
    'protocol.https.allow=always',
    'protocol.http.allow=always',
    'protocol.ssh.allow=always',
    'submodule.recurse=false',
    'diff.submodule=short',
    'fetch.recurseSubmodules=false',
    'push.recurseSubmodules=no',
    // Automatic maintenance after a commit or fetch would prefetch from every remote the config names.
    'maintenance.auto=false',
    'gc.auto=0',
    // The objects' info folder git gets is ccp's (see objectMirror): no commit-graph there to trust.
    'core.commitGraph=false',
    'fetch.writeCommitGraph=false',
    'pull.twohead=ort',
    'pull.octopus=octopus',
  ];
}
