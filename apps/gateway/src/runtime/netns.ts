import { execFile } from 'node:child_process';
import { statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { WORKSPACE_LINK } from './egress-gateway-files.js';
import { RuntimeError } from './workspace-runtime.js';

export class CommandError extends Error {
  constructor(
    readonly command: string,
    readonly stderr: string,
    message: string,
  ) {
    super(message);
    this.name = 'CommandError';
  }
}

export interface CommandResult {
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  /** What the program reads on stdin; a promise is written when it resolves, and kills the program if it rejects. */
  input?: string | Promise<string>;
  timeoutMs?: number;
  /** Kills the program when it aborts (a cancelled start). */
  signal?: AbortSignal;
}

/**
 * Runs a program with an argument array (never a shell), optionally feeding stdin; rejects on a non-zero
 * exit.
 */
export function run(
  command: string,
  args: readonly string[],
  options: RunOptions = {},
): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      command,
      args,
      {
        timeout: options.timeoutMs ?? 10_000,
        maxBuffer: 1 << 20,
        encoding: 'utf8',
        signal: options.signal,
      },
      (error, stdout, stderr) => {
        if (error) {
          const detail = stderr.trim().split('\n').slice(-3).join(' | ') || error.message;
          reject(new CommandError(command, stderr, `${command} ${args[0] ?? ''}: ${detail}`));
        } else resolve({ stdout, stderr });
      },
    );
    // A program that exits without reading its input closes the pipe; its exit status tells what happened.
    child.stdin?.on('error', () => {});
    Promise.resolve(options.input ?? '').then(
      (input) => child.stdin?.end(input),
      () => child.kill(),
    );
  });
}

/** Runs a host program inside the network namespace of `pid` (and nothing else: files stay the host's). */
export function runInNetns(
  pid: number,
  command: string,
  args: readonly string[],
  options: RunOptions = {},
): Promise<CommandResult> {
  return runInNetnsAt(`/proc/${pid}/ns/net`, command, args, options);
}

/** Runs a host program inside the network namespace at `path` (a process's, or one held open: early-netns.ts). */
export function runInNetnsAt(
  path: string,
  command: string,
  args: readonly string[],
  options: RunOptions = {},
): Promise<CommandResult> {
  return run('nsenter', [`--net=${path}`, '--', command, ...args], options);
}

/** The inode of a process's network namespace: the namespace's identity. Throws when the process is gone. */
export function netnsInode(pid: number | 'self'): number {
  return statSync(`/proc/${pid}/ns/net`).ino;
}

let ownInode: number | undefined;

/** The inode of the network namespace this process runs in: the host's. */
export function hostNetnsInode(): number {
  ownInode ??= netnsInode('self');
  return ownInode;
}

/**
 * Fails closed unless the workspace has a network namespace of its own, neither the host's nor its gateway's: a
 * container engine that left it in the host's would otherwise have the link's address and default route set
 * on the host (the workspace's container asks Docker for no network at all, see container-specs.ts).
 */
function requireOwnNamespace(gatewayPid: number, workspacePid: number): void {
  const workspace = netnsInode(workspacePid);
  const shared =
    workspace === hostNetnsInode()
      ? "the host's"
      : workspace === netnsInode(gatewayPid)
        ? "its egress gateway's"
        : null;
  if (shared)
    throw new RuntimeError(
      'network_setup_failed',
      `the workspace (PID ${workspacePid}) shares ${shared} network namespace, so nothing was linked: its container asks Docker for no network (NetworkDisabled) and a namespace of its own, and this Docker gave none: workspaces cannot run on this version of Docker (\`docker version\` names it)`,
    );
}

/**
 * Connects a workspace to its egress gateway with a veth pair whose ends are created directly inside the two
 * namespaces, so nothing ever appears in the host's. Idempotent: an old link is removed first. The workspace
 * gets its only route through the gateway; the gateway side needs no route (its TPROXY rules take the
 * traffic).
 */
export async function linkWorkspace(gatewayPid: number, workspacePid: number): Promise<void> {
  requireOwnNamespace(gatewayPid, workspacePid);
  const { gatewayInterface, workspaceInterface, gatewayAddress, workspaceAddress, prefixLength } =
    WORKSPACE_LINK;
  // Deleting one end of a veth deletes its peer too; usually there is nothing left to delete.
  if (await hasInterface(gatewayPid, gatewayInterface))
    await runInNetns(gatewayPid, 'ip', ['link', 'del', gatewayInterface]);
  if (await hasInterface(workspacePid, workspaceInterface))
    await runInNetns(workspacePid, 'ip', ['link', 'del', workspaceInterface]);
  await run('ip', [
    'link',
    'add',
    gatewayInterface,
    'netns',
    String(gatewayPid),
    'type',
    'veth',
    'peer',
    'name',
    workspaceInterface,
    'netns',
    String(workspacePid),
  ]);
  // Both ends at once: nothing crosses the link before this resolves.
  await Promise.all([
    runInNetns(gatewayPid, 'ip', ['-batch', '-'], {
      input: [
        `addr add ${gatewayAddress}/${prefixLength} dev ${gatewayInterface}`,
        `link set ${gatewayInterface} up`,
        '',
      ].join('\n'),
    }),
    runInNetns(workspacePid, 'ip', ['-batch', '-'], {
      input: [
        `addr add ${workspaceAddress}/${prefixLength} dev ${workspaceInterface}`,
        `link set ${workspaceInterface} up`,
        `route add default via ${gatewayAddress} dev ${workspaceInterface}`,
        '',
      ].join('\n'),
    }),
  ]);
}

/**
 * Cuts a workspace off its egress gateway while the gateway still runs. Deleting the gateway's end takes the
 * workspace's with it at once, whereas a removed container's namespace is torn down later, leaving the
 * workspace's end in the way of a new link for a moment.
 */
export async function unlinkWorkspace(gatewayPid: number): Promise<void> {
  if (await hasInterface(gatewayPid, WORKSPACE_LINK.gatewayInterface))
    await runInNetns(gatewayPid, 'ip', ['link', 'del', WORKSPACE_LINK.gatewayInterface]);
}

async function hasInterface(pid: number, name: string): Promise<boolean> {
  const devices = await readFile(`/proc/${pid}/net/dev`, 'utf8');
  return devices.split('\n').some((line) => line.trim().startsWith(`${name}:`));
}

/**
 * Whether these two namespaces are linked: the gateway's has its end and the workspace's its default route
 * through it (its last step of linking). Both sides count: a namespace whose container stopped is torn down
 * asynchronously, so the peer of a dead one can linger for a moment after a restart.
 */
export async function workspaceLinked(workspacePid: number, gatewayPid: number): Promise<boolean> {
  let table: string;
  try {
    if (!(await hasInterface(gatewayPid, WORKSPACE_LINK.gatewayInterface))) return false;
    table = await readFile(`/proc/${workspacePid}/net/route`, 'utf8');
  } catch {
    return false;
  }
  // Columns: Iface Destination Gateway …, addresses in little-endian hex.
  return table
    .split('\n')
    .slice(1)
    .some((line) => {
      const [iface, destination] = line.trim().split(/\s+/);
      return iface === WORKSPACE_LINK.workspaceInterface && destination === '00000000';
    });
}

/** Whether a process in the namespace of `pid` listens on this TCP port (any address). */
export async function listensOnTcp(pid: number, port: number): Promise<boolean> {
  let table: string;
  try {
    // Go listens on the wildcard with one dual-stack socket, listed under tcp6 even with IPv6 disabled.
    const tables = await Promise.all(
      ['tcp', 'tcp6'].map((file) => readFile(`/proc/${pid}/net/${file}`, 'utf8')),
    );
    table = tables.join('\n');
  } catch {
    return false;
  }
  const local = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  // Columns: sl local_address rem_address st …; state 0A is LISTEN.
  return table
    .split('\n')
    .slice(1)
    .some((line) => {
      const fields = line.trim().split(/\s+/);
      return fields[1]?.endsWith(local) === true && fields[3] === '0A';
    });
}
