import { createInterface } from 'node:readline/promises';
import { WRAPPER_DIR } from './command-proxy.js';
import {
  type Config,
  configPath,
  loadConfig,
  type MountMode,
  normaliseGateway,
  readRawConfig,
  saveConfig,
  validateConfig,
} from './config.js';
import { connectWorkspace } from './connect.js';
import { ConfigError } from './errors.js';
import { runSession } from './session-runner.js';
import { execCollect } from './ssh-connection.js';
import { readSecret } from './terminal.js';
import {
  defaultSessionName,
  freshSessionName,
  LIST_SESSIONS,
  parseSessions,
  sessionCommandLine,
  validSessionName,
} from './tmux.js';

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
  wait: string;
}

export async function runAttach(args: string[], flags: AttachFlags): Promise<number> {
  const loaded = loadConfig();
  const config: Config = { ...loaded, mount_mode: flags.mountMode ?? loaded.mount_mode };
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

export async function runInit(flags: {
  gateway?: string;
  shortId?: string;
  savePassword?: boolean;
}): Promise<void> {
  const file = configPath();
  const current = readRawConfig(file);
  const gatewayText =
    flags.gateway ?? (typeof current.gateway === 'string' ? current.gateway : await ask('Gateway URL: '));
  const gateway = normaliseGateway(gatewayText);
  if (!gateway)
    throw new ConfigError(`the gateway must be an http:// or https:// URL (got "${gatewayText}")`);
  const shortId =
    flags.shortId ?? (typeof current.short_id === 'string' ? current.short_id : await ask('Host short ID: '));
  const next: Record<string, unknown> = { ...current, gateway, short_id: shortId };
  delete next.password;
  if (flags.savePassword) {
    const password = process.env.CCP_PASSWORD ?? (await readSecret(`Password for host ${shortId}: `));
    if (!password) throw new ConfigError('--save-password: no password given (terminal or CCP_PASSWORD)');
    next.password = password;
  }
  // Refuse to write a file that would not load.
  const valid = validateConfig(next, file);
  saveConfig(
    {
      gateway: valid.gateway,
      short_id: valid.short_id,
      ...(valid.password === undefined ? {} : { password: valid.password }),
      ...pickExplicit(current),
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
