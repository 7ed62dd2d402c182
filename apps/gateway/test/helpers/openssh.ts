import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';

export interface ClientResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a client tool with a hard deadline; never rejects, so a failed assertion shows the output. */
export function runClient(
  command: string,
  args: string[],
  options: { env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<ClientResult> {
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      env: { ...process.env, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const timer = setTimeout(() => {
      stderr += `\n[killed after ${options.timeoutMs ?? 60_000} ms]`;
      child.kill('SIGKILL');
    }, options.timeoutMs ?? 60_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** OpenSSH options for the gateway's SSH proxy on loopback: no config file, no known hosts, keep-alives. */
export function proxyOptions(port: number): string[] {
  return [
    '-p',
    String(port),
    '-F',
    '/dev/null',
    '-o',
    'StrictHostKeyChecking=no',
    '-o',
    'UserKnownHostsFile=/dev/null',
    '-o',
    'ConnectTimeout=10',
    '-o',
    'ServerAliveInterval=5',
  ];
}

/** Password authentication only, one attempt: the password comes from sshpass's environment. */
export const PASSWORD_ONLY = [
  '-o',
  'PubkeyAuthentication=no',
  '-o',
  'PreferredAuthentications=password',
  '-o',
  'NumberOfPasswordPrompts=1',
];

/** `ssh` through the proxy with a password handed over by sshpass (never on a command line). */
export function sshWithPassword(
  port: number,
  password: string,
  args: string[],
  timeoutMs?: number,
): Promise<ClientResult> {
  return runClient('sshpass', ['-e', 'ssh', ...proxyOptions(port), ...PASSWORD_ONLY, ...args], {
    env: { SSHPASS: password },
    timeoutMs,
  });
}

/** Key authentication only, never a prompt. */
export const keyOnly = (keyFile: string) => [
  '-o',
  'BatchMode=yes',
  '-o',
  'IdentitiesOnly=yes',
  '-i',
  keyFile,
];

/** `ssh` through the proxy with a private key file. */
export function sshWithKey(
  port: number,
  keyFile: string,
  args: string[],
  options: { env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<ClientResult> {
  return runClient('ssh', [...proxyOptions(port), ...keyOnly(keyFile), ...args], options);
}

/** A long-running `ssh` through the proxy whose output lines are collected as they arrive. */
export interface LiveSession {
  child: ChildProcessWithoutNullStreams;
  lines: string[];
  stderr: () => string;
  exited: Promise<number | null>;
}

export function openLiveSession(port: number, password: string, args: string[]): LiveSession {
  const child = spawn('sshpass', ['-e', 'ssh', ...proxyOptions(port), ...PASSWORD_ONLY, ...args], {
    env: { ...process.env, SSHPASS: password },
  });
  const lines: string[] = [];
  let pending = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    pending += chunk.toString('utf8');
    const complete = pending.split('\n');
    pending = complete.pop() ?? '';
    lines.push(...complete);
  });
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return { child, lines, stderr: () => stderr, exited };
}

export async function within<T>(ms: number, what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took more than ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  ms = 20_000,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
