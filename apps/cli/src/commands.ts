import { createInterface } from 'node:readline/promises';
import type { EntryCheck } from '@ccp/api';
import { LIST_SESSIONS, parseSessions, validSessionName } from '@ccp/api/tmux';
import { WRAPPER_DIR } from './command-proxy.js';
import {
  type Config,
  configPath,
  loadConfig,
  type MountMode,
  normaliseGateway,
  readRawConfig,
  SHORT_ID,
  saveConfig,
  validateConfig,
} from './config.js';
import { connectWorkspace } from './connect.js';
import { WrongPasswordError } from './entry-auth.js';
import { ConfigError } from './errors.js';
import { checkGateway, checkHost, hostStateAdvice } from './gateway-checks.js';
import { runSession } from './session-runner.js';
import { execCollect } from './ssh-connection.js';
import { readSecret, yellow } from './terminal.js';
import { defaultSessionName, failureShellScript, freshSessionName, sessionCommandLine } from './tmux.js';

function waitSeconds(text: string): number {
  const value = Number(text);
  if (!Number.isFinite(value) || value < 0)
    throw new ConfigError(`--wait must be a number of seconds (got ${text})`);
  return value;
}

export interface AttachFlags {
  newSession?: boolean;
  takeOver?: boolean;
  session?: string;
  mountMode?: MountMode;
  sessionCommand?: string;
  wait: string;
}

/** `--session-command`, when given: the same check as the config key's. */
function sessionCommandFlag(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (value.trim() === '')
    throw new ConfigError('--session-command: a command line is needed, e.g. --session-command bash');
  return value.trim();
}

export async function runAttach(args: string[], flags: AttachFlags): Promise<number> {
  const loaded = loadConfig();
  const config: Config = {
    ...loaded,
    mount_mode: flags.mountMode ?? loaded.mount_mode,
    session_command: sessionCommandFlag(flags.sessionCommand) ?? loaded.session_command,
  };
  if (flags.newSession && (flags.takeOver || flags.session))
    throw new ConfigError(
      '--new-session starts its own session; it cannot be combined with --take-over or --session',
    );
  if (flags.session !== undefined && !validSessionName(flags.session))
    throw new ConfigError('--session: a name of letters, digits, _ and - (at most 64)');
  const mountMode = config.mount_mode;
  const cwd = process.cwd();
  const wait = waitSeconds(flags.wait);
  const connected = await connectWorkspace(config, wait);
  const name = flags.newSession ? freshSessionName(cwd) : (flags.session ?? defaultSessionName(cwd));
  process.stderr.write(`ccp: session ${name}\r\n`);
  return runSession({
    target: connected.target,
    knownHosts: connected.knownHosts,
    config,
    mountMode,
    cwd,
    first: connected.link,
    plan: {
      name,
      cwd,
      fresh: Boolean(flags.newSession),
      takeOver: Boolean(flags.takeOver),
      commandLine: sessionCommandLine(config.session_command, args),
      pathPrefix: WRAPPER_DIR,
      onFailure: failureShellScript(config.session_command, configPath()),
    },
  });
}

export async function runSessions(flags: { json?: boolean; wait: string }): Promise<void> {
  const config = loadConfig();
  const { link } = await connectWorkspace(config, waitSeconds(flags.wait));
  try {
    const sessions = parseSessions((await execCollect(link.client, LIST_SESSIONS)).stdout);
    if (flags.json) {
      process.stdout.write(`${JSON.stringify(sessions, null, 2)}\n`);
      return;
    }
    if (sessions.length === 0) {
      process.stdout.write('no sessions; `ccp` starts one\n');
      return;
    }
    const rows = [
      ['SESSION', 'CREATED', 'CLIENTS', 'WINDOWS'],
      ...sessions.map((s) => [
        s.name,
        new Date(s.created_at).toLocaleString(),
        String(s.attached_clients),
        String(s.windows),
      ]),
    ];
    const widths = rows[0]?.map((_, i) => Math.max(...rows.map((row) => row[i]?.length ?? 0))) ?? [];
    for (const row of rows)
      process.stdout.write(
        `${row
          .map((cell, i) => cell.padEnd(widths[i] ?? 0))
          .join('  ')
          .trimEnd()}\n`,
      );
  } finally {
    link.client.end();
  }
}

async function ask(question: string): Promise<string> {
  if (!process.stdin.isTTY) return '';
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return (await rl.question(question)).trim();
  } finally {
    rl.close();
  }
}

export interface InitFlags {
  gateway?: string;
  shortId?: string;
  savePassword?: boolean;
  sessionCommand?: string;
}

/**
 * Stores the gateway URL and the short ID, after checking them against the gateway: that it is the gateway's
 * API (exit 2 when nothing answers, 4 when something else does), that the short ID names a host and the
 * password is its owner's (exit 1). A config file is written only when they pass.
 */
export async function runInit(flags: InitFlags): Promise<void> {
  const file = configPath();
  const current = readRawConfig(file);
  const gatewayText =
    flags.gateway ?? (typeof current.gateway === 'string' ? current.gateway : await ask('Gateway URL: '));
  const gateway = normaliseGateway(gatewayText);
  if (!gateway)
    throw new ConfigError(`the gateway must be an http:// or https:// URL (got "${gatewayText}")`);
  const shortId =
    flags.shortId ?? (typeof current.short_id === 'string' ? current.short_id : await ask('Host short ID: '));
  if (!SHORT_ID.test(shortId))
    throw new ConfigError(
      `a short ID is 8 lower-case letters and digits, as on the host's page in the dashboard (got "${shortId}")`,
    );
  const sessionCommand = sessionCommandFlag(flags.sessionCommand);
  const next: Record<string, unknown> = {
    ...current,
    gateway,
    short_id: shortId,
    ...(sessionCommand === undefined ? {} : { session_command: sessionCommand }),
  };
  delete next.password;
  // Refuse to write a file that would not load (checked before the network: a typo costs no round trip).
  validateConfig(next, file);

  const health = await checkGateway(gateway);
  process.stderr.write(
    `ccp: gateway ${gateway}: answers${health.status === 'ok' ? '' : ` (${health.status})`}\n`,
  );
  const given = process.env.CCP_PASSWORD || undefined;
  let checked: EntryCheck | undefined;
  let password: string | undefined;
  for (let attempt = 1; !checked; attempt += 1) {
    password = given ?? (await readSecret(`Password for host ${shortId}: `)) ?? undefined;
    if (!password) break;
    try {
      checked = await checkHost(gateway, shortId, password);
    } catch (error) {
      if (error instanceof WrongPasswordError && given === undefined && attempt < 3) {
        process.stderr.write('ccp: wrong password, try again\n');
        continue;
      }
      throw error;
    }
  }
  if (checked) {
    process.stderr.write(
      `ccp: host ${shortId} (${checked.username}'s): password accepted; ${hostStateAdvice(checked.host_status).text}\n`,
    );
  } else {
    if (flags.savePassword)
      throw new ConfigError('--save-password: no password given (terminal or CCP_PASSWORD)');
    process.stderr.write(
      yellow('ccp: the password was not checked (no terminal and no CCP_PASSWORD); `ccp doctor` checks it\n'),
    );
  }
  const valid = validateConfig({ ...next, ...(flags.savePassword && password ? { password } : {}) }, file);
  saveConfig(
    {
      gateway: valid.gateway,
      short_id: valid.short_id,
      ...(valid.password === undefined ? {} : { password: valid.password }),
      ...pickExplicit(next),
    },
    file,
  );
  process.stderr.write(
    `ccp: saved ${file}${flags.savePassword ? ' (with the password, mode 0600)' : ' (the password will be asked when connecting)'}\n`,
  );
}

/** Keeps the optional keys the user wrote, and only those, so defaults stay defaults. */
function pickExplicit(current: Record<string, unknown>): Partial<Config> {
  const kept: Record<string, unknown> = {};
  for (const key of [
    'mount_mode',
    'session_command',
    'proxy_commands',
    'proxy_git_signing',
    'hot_sync_max_file_mb',
    'hot_sync_ignore',
  ])
    if (current[key] !== undefined) kept[key] = current[key];
  return kept as Partial<Config>;
}

export function runConfigShow(flags: { json?: boolean }): void {
  const file = configPath();
  const { password, ...config } = loadConfig(file);
  const shown = { file, ...config, password_saved: password !== undefined };
  if (flags.json) process.stdout.write(`${JSON.stringify(shown, null, 2)}\n`);
  else
    for (const [key, value] of Object.entries(shown))
      process.stdout.write(`${key}: ${JSON.stringify(value)}\n`);
}
