import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { parseDocument, stringify } from 'yaml';
import { ConfigError } from './errors.js';

export const MOUNT_MODES = ['auto', 'full', 'sshfs-only'] as const;
export type MountMode = (typeof MOUNT_MODES)[number];

export interface Config {
  gateway: string;
  short_id: string;
  /** Present only when the user asked to save it. */
  password?: string;
  mount_mode: MountMode;
  /** A shell command line run in new tmux sessions; passthrough arguments are appended. */
  session_command: string;
  /** Absent means the default `["git"]`; an explicit `[]` turns the command proxy off. */
  proxy_commands: string[];
  /** Whether git run from the workspace may sign (commit -S, tag -s, push --signed) with the user's key. */
  proxy_git_signing: boolean;
  hot_sync_max_file_mb: number;
  /** Folder names that `full` mode links to sshfs instead of copying; `[]` copies every folder. */
  hot_sync_ignore: string[];
}

export const DEFAULTS = {
  mount_mode: 'auto',
  session_command: 'claude',
  proxy_commands: ['git'],
  proxy_git_signing: false,
  hot_sync_max_file_mb: 50,
  hot_sync_ignore: ['.git', 'node_modules'],
} as const satisfies Partial<Config>;

const KEYS = [
  'gateway',
  'short_id',
  'password',
  'mount_mode',
  'session_command',
  'proxy_commands',
  'proxy_git_signing',
  'hot_sync_max_file_mb',
  'hot_sync_ignore',
] as const;

/** A short ID as the gateway makes them: 8 of lower-case letters and digits, without 0, 1, i, l, o. */
export const SHORT_ID = /^[a-hjkmnp-z2-9]{8}$/;
const COMMAND_NAME = /^[A-Za-z0-9._+-]{1,64}$/;
const FOLDER_NAME = /^(?!\.{1,2}$)[^/\0]{1,255}$/;

/** `$CCP_CONFIG`, else `$XDG_CONFIG_HOME/ccp/config.yaml`, else `~/.config/ccp/config.yaml`. */
export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.CCP_CONFIG) return path.resolve(env.CCP_CONFIG);
  const base = env.XDG_CONFIG_HOME || path.join(homedir(), '.config');
  return path.join(base, 'ccp', 'config.yaml');
}

/** Where state that belongs with the configuration lives (the pinned host keys). */
export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  return path.dirname(configPath(env));
}

function fail(file: string, problems: string[]): never {
  throw new ConfigError(`${file} is not valid:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
}

export function normaliseGateway(value: string): string | null {
  const trimmed = value.trim().replace(/\/+$/, '');
  try {
    const url = new URL(trimmed);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
    if (url.search || url.hash || url.username) return null;
    return trimmed;
  } catch {
    return null;
  }
}

/** Checks every key and reports all problems at once, each naming the key and what is wanted. */
export function validateConfig(raw: unknown, file: string): Config {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    fail(file, ['the file must be a YAML mapping of keys to values']);
  const input = raw as Record<string, unknown>;
  const problems: string[] = [];
  for (const key of Object.keys(input)) {
    if (!(KEYS as readonly string[]).includes(key))
      problems.push(`unknown key "${key}" (known keys: ${KEYS.join(', ')})`);
  }
  const gateway = typeof input.gateway === 'string' ? normaliseGateway(input.gateway) : null;
  if (!gateway)
    problems.push('gateway: an http:// or https:// URL of the gateway is required (run `ccp init`)');
  const shortId = input.short_id;
  if (typeof shortId !== 'string' || !SHORT_ID.test(shortId))
    problems.push("short_id: the host's 8-character short ID is required (run `ccp init`)");
  const password = input.password;
  if (password !== undefined && (typeof password !== 'string' || password === ''))
    problems.push('password: must be a non-empty string when present');
  const mountMode = input.mount_mode ?? DEFAULTS.mount_mode;
  if (!MOUNT_MODES.includes(mountMode as MountMode))
    problems.push(`mount_mode: must be one of ${MOUNT_MODES.join(', ')} (got ${JSON.stringify(mountMode)})`);
  const sessionCommand = input.session_command ?? DEFAULTS.session_command;
  if (typeof sessionCommand !== 'string' || sessionCommand.trim() === '')
    problems.push('session_command: must be a non-empty command line');
  const proxy = input.proxy_commands ?? DEFAULTS.proxy_commands;
  if (!Array.isArray(proxy) || proxy.some((name) => typeof name !== 'string' || !COMMAND_NAME.test(name)))
    problems.push('proxy_commands: must be a list of command names such as [git] ([] turns the proxy off)');
  const signing = input.proxy_git_signing ?? DEFAULTS.proxy_git_signing;
  if (typeof signing !== 'boolean')
    problems.push('proxy_git_signing: must be true or false (false: git from the workspace never signs)');
  const maxMb = input.hot_sync_max_file_mb ?? DEFAULTS.hot_sync_max_file_mb;
  if (typeof maxMb !== 'number' || !Number.isInteger(maxMb) || maxMb < 1 || maxMb > 10_240)
    problems.push('hot_sync_max_file_mb: must be a whole number of megabytes from 1 to 10240');
  const ignore = input.hot_sync_ignore ?? DEFAULTS.hot_sync_ignore;
  if (!Array.isArray(ignore) || ignore.some((name) => typeof name !== 'string' || !FOLDER_NAME.test(name)))
    problems.push(
      'hot_sync_ignore: must be a list of folder names such as [.git, node_modules] (no slashes)',
    );
  if (problems.length > 0) fail(file, problems);
  return {
    gateway: gateway as string,
    short_id: shortId as string,
    ...(password === undefined ? {} : { password: password as string }),
    mount_mode: mountMode as MountMode,
    session_command: (sessionCommand as string).trim(),
    proxy_commands: [...new Set(proxy as string[])],
    proxy_git_signing: signing as boolean,
    hot_sync_max_file_mb: maxMb as number,
    hot_sync_ignore: [...new Set(ignore as string[])],
  };
}

export function loadConfig(file = configPath()): Config {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT')
      throw new ConfigError(`no configuration at ${file}; run \`ccp init\` first`);
    throw new ConfigError(`cannot read ${file}: ${(error as Error).message}`);
  }
  const document = parseDocument(text);
  if (document.errors.length > 0)
    fail(
      file,
      document.errors.map((e) => e.message.split('\n')[0] ?? e.message),
    );
  return validateConfig(document.toJS() ?? {}, file);
}

/** Written atomically with mode 0600 (it may hold a password), in a 0700 directory. */
export function saveConfig(config: Partial<Config>, file = configPath()): void {
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const ordered: Record<string, unknown> = {};
  for (const key of KEYS) if (config[key] !== undefined) ordered[key] = config[key];
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, stringify(ordered), { mode: 0o600 });
  chmodSync(temporary, 0o600);
  renameSync(temporary, file);
}

/** The raw mapping of an existing file, so `init` keeps keys it was not asked about. */
export function readRawConfig(file = configPath()): Record<string, unknown> {
  try {
    const value = parseDocument(readFileSync(file, 'utf8')).toJS();
    return value && typeof value === 'object' && !Array.isArray(value) ? value : {};
  } catch {
    return {};
  }
}
