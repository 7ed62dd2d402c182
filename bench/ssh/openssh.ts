// Bulk transfers with the OpenSSH client. Each path gets a master connection (ControlMaster), and every timed
// transfer runs as a multiplexed session over it: the master reads and writes the transfer's pipe itself, so
// the timing holds the data only, not the key exchange and the proxy's login to the workspace.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { type Child, startProcess } from '../lib/children.js';

export interface SshTarget {
  label: string;
  host: string;
  port: number;
  user: string;
  keyFile: string;
  /** The client's cipher (-c); null leaves OpenSSH's own preference. */
  cipher: string | null;
}

/** Options that keep the user's own configuration, agent and known hosts out of the measurement. */
function commonOptions(target: SshTarget, controlPath: string): string[] {
  return [
    '-F',
    '/dev/null',
    '-i',
    target.keyFile,
    '-o',
    'IdentitiesOnly=yes',
    '-o',
    'IdentityAgent=none',
    '-o',
    'BatchMode=yes',
    '-o',
    'StrictHostKeyChecking=no',
    '-o',
    'UserKnownHostsFile=/dev/null',
    '-o',
    `ControlPath=${controlPath}`,
    ...(target.cipher ? ['-c', target.cipher] : []),
    '-p',
    String(target.port),
    '-l',
    target.user,
  ];
}

async function run(name: string, command: string, args: string[]): Promise<void> {
  const child = startProcess(name, command, args);
  const code = await child.exited;
  if (code !== 0) throw new Error(`${name} exited with ${code}: ${child.stderrTail()}`);
}

export interface Master {
  target: SshTarget;
  /** The cipher the client and the server agreed on, as `ssh -v` reports it. */
  cipher: string;
  /** Sends `bytes` to `cat > /dev/null` on the server; resolves with the milliseconds it took. */
  upload(bytes: number): Promise<number>;
  /** Reads `bytes` from `head -c … /dev/zero` on the server into /dev/null; resolves with the milliseconds. */
  download(bytes: number): Promise<number>;
  stop(): Promise<void>;
}

/** Opens the master connection of one path (a tracked child) and waits until it takes sessions. */
export async function openMaster(target: SshTarget, dir: string): Promise<Master> {
  const controlPath = path.join(dir, `cm-${target.label}`);
  const logFile = path.join(dir, `ssh-${target.label}.log`);
  const options = commonOptions(target, controlPath);
  const master: Child = startProcess(`ssh master (${target.label})`, 'ssh', [
    ...options,
    '-v',
    '-E',
    logFile,
    '-o',
    'ControlMaster=yes',
    '-N',
    target.host,
  ]);
  let exited = false;
  master.exited.then(() => {
    exited = true;
  });
  const until = Date.now() + 20_000;
  for (;;) {
    const check = startProcess('ssh -O check', 'ssh', [...options, '-O', 'check', target.host]);
    if ((await check.exited) === 0) break;
    if (exited) throw new Error(`the ssh master of ${target.label} exited: ${readLog(logFile).slice(-2000)}`);
    if (Date.now() > until) throw new Error(`the ssh master of ${target.label} did not come up`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const cipher = /kex: server->client cipher: (\S+)/.exec(readLog(logFile))?.[1] ?? 'unknown';
  // "$@" holds the ssh options; the byte count and the target come first.
  const timed = async (script: string, bytes: number) => {
    const began = performance.now();
    await run(`ssh transfer (${target.label})`, 'sh', [
      '-c',
      script,
      'transfer',
      String(bytes),
      target.host,
      ...options,
      '-o',
      'ControlMaster=no',
    ]);
    return performance.now() - began;
  };
  return {
    target,
    cipher,
    upload: (bytes) =>
      timed('n=$1 host=$2; shift 2; head -c "$n" /dev/zero | ssh "$@" "$host" "cat > /dev/null"', bytes),
    download: (bytes) =>
      timed('n=$1 host=$2; shift 2; exec ssh "$@" "$host" "head -c $n /dev/zero" > /dev/null', bytes),
    stop: master.stop,
  };
}

function readLog(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}
