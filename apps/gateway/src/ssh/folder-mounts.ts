import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { chmod, chown, mkdir, rmdir } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Actor } from '@ccp/api';
import type { Logger } from 'pino';
import type { ServerChannel } from 'ssh2';
import type { BackgroundEvents } from '../events/background-events.js';
import { isMountPoint, MOUNTS_IN_WORKSPACE, mountsUnder } from '../runtime/folder-mount-points.js';
import { closeMountTree } from '../runtime/handed-over-files.js';
import type { WorkspaceRuntime } from '../runtime/workspace-runtime.js';
import type { Traffic } from './relay.js';

/** The subsystem the ccp CLI asks for; everything else goes to the workspace's sshd. */
export const FOLDER_MOUNT_SUBSYSTEM = 'ccp-mount@cloud-cli-proxy';

/**
 * What the client says first on the channel, as one JSON line. After it the channel carries SFTP: the client
 * serves its folder, sshfs on the gateway reads it. `link`: the folder's own path in the workspace becomes a
 * symbolic link to the mount; `directory`: a link to a directory the client fills itself (its hot copy).
 */
interface MountRequest {
  path: string;
  layout: 'link' | 'directory';
}

/** Who asked, on which host: for placing the folder, counting its bytes and the events. */
export interface MountSession {
  hostId: string;
  shortId: string;
  linuxUser: string;
  user: { id: string; username: string };
  actor: Actor;
  clientAddress: string;
  traffic: Traffic;
  /** The node holding the workspace when it is not this gateway's: sshfs must run on the workspace's machine. */
  remoteNode: string | null;
}

export interface FolderMountsOptions {
  runtime: WorkspaceRuntime;
  events: BackgroundEvents;
  /** The unprivileged user sshfs runs as (through the setuid fusermount3): it parses what clients send. */
  user: string;
  /** Owner of the files inside the workspace: the workspace user's uid and gid. */
  workspaceUid: number;
  log: Logger;
  /** How long sshfs has to mount and the workspace to place the folder. */
  readyMs?: number;
}

interface LiveMount {
  key: string;
  mountPoint: string;
  child: ChildProcess;
  closed: Promise<void>;
}

const run = promisify(execFile);
const HEADER_LIMIT = 8192;

/** System trees where a mounted folder would shadow the workspace's own files. */
const RESERVED = [
  '/bin',
  '/boot',
  '/dev',
  '/etc',
  '/lib',
  '/lib64',
  '/proc',
  '/run',
  '/sbin',
  '/sys',
  '/usr',
];

/** A clear reason why the path cannot be used, or null. */
export function invalidMountPath(target: string): string | null {
  if (typeof target !== 'string' || !target.startsWith('/')) return 'the folder must be an absolute path';
  if (target.length > 1024 || target.includes('\0')) return 'the folder path is too long or not text';
  if (target === '/') return '/ is a system folder of the workspace';
  if (path.posix.normalize(target) !== target || target.endsWith('/'))
    return 'the folder path must be normalised (no "..", "." or repeated or trailing "/")';
  if (RESERVED.some((root) => target === root || target.startsWith(`${root}/`)))
    return `${target} is a system folder of the workspace`;
  return null;
}

/**
 * Places the folder at its path in the workspace, run as root there ($1 layout, $2 path, $3 mount, $4 user,
 * $5 mount id): the path becomes a link to the mount (`link`) or to the user's copy in ~/.ccp/hot/<id>
 * (`directory`), replacing only an empty folder or an earlier link of ours. Prints where the link leads.
 */
const PLACE = `
set -eu
layout=$1 target=$2 source=$3 user=$4 id=$5
fail() { echo "$*" >&2; exit 3; }
home=$(getent passwd "$user" | cut -d: -f6)
[ -n "$home" ] || fail "the workspace has no user $user"
if [ "$layout" = directory ]; then
  dest=$home/.ccp/hot/$id
  for dir in "$home/.ccp" "$home/.ccp/hot" "$dest"; do
    [ -d "$dir" ] || { mkdir "$dir"; chown "$user:" "$dir"; }
  done
else
  dest=$source
fi
if [ -L "$target" ]; then
  case $(readlink "$target") in
    "$(dirname "$source")"/* | "$home/.ccp/hot"/*) rm -f "$target" ;;
    *) fail "$target is a symbolic link of your own" ;;
  esac
fi
missing=$target
while [ ! -e "$(dirname "$missing")" ] && [ ! -L "$(dirname "$missing")" ]; do missing=$(dirname "$missing"); done
if [ "$missing" != "$target" ]; then
  mkdir -p "$(dirname "$target")"
  chown -R "$user:" "$missing"
fi
if [ -d "$target" ]; then rmdir "$target" 2>/dev/null || fail "$target already exists in the workspace and is not empty"; fi
[ ! -e "$target" ] || fail "$target already exists in the workspace and is not a folder"
ln -s "$dest" "$target"
chown -h "$user:" "$target"
echo "$dest"
`;

/** Removes the link when it still points at this mount ($1 path, $2 mount); a link to the copy stays. */
const UNPLACE = `[ "$(readlink "$1")" = "$2" ] && rm -f "$1"; true`;

/**
 * Folder mounts for the CLI: sshfs runs here, on the gateway, reading SFTP from the client's channel, and mounts
 * under the host's directory, which the workspace sees read-only (the mount propagates into its namespace). The
 * workspace needs no FUSE device and no extra privilege. One mount per host and path: a reconnecting client
 * replaces the mount its dead connection left.
 */
export class FolderMounts {
  private readonly live = new Map<string, LiveMount>();
  private readonly readyMs: number;

  constructor(private readonly options: FolderMountsOptions) {
    this.readyMs = options.readyMs ?? 15_000;
  }

  /** Serves one mount request on an accepted subsystem channel; reports on its stderr, one line. */
  handle(channel: ServerChannel, session: MountSession): void {
    const { traffic, user } = session;
    // The fields every mount event shares: who, which host, from where.
    const about = (message: string) => ({
      message: `${message} (${user.username}, host ${session.shortId})`,
      actor: session.actor,
      userId: user.id,
      hostId: session.hostId,
    });
    const who = { username: user.username, short_id: session.shortId, client_address: session.clientAddress };
    channel.on('data', (chunk: Buffer) => {
      traffic.toWorkspace += chunk.length;
    });
    let request: MountRequest | null = null;
    readHeader(channel)
      .then(({ request: asked, rest }) => {
        request = asked;
        return this.mount(channel, rest, asked, session);
      })
      .then(({ ended }) => {
        const data = { path: request!.path, layout: request!.layout };
        void this.options.events.emit({
          type: 'ssh.mount.opened',
          level: 'info',
          ...about(`Folder ${request!.path} mounted`),
          data: { ...who, ...data },
        });
        const openedAt = Date.now();
        void ended.then(() =>
          this.options.events.emit({
            type: 'ssh.mount.closed',
            level: 'info',
            ...about(`Folder ${request!.path} unmounted`),
            data: { ...who, ...data, duration_ms: Date.now() - openedAt },
          }),
        );
      })
      .catch((error: Error) => {
        void this.options.events.emit({
          type: 'ssh.mount.failed',
          level: 'warn',
          ...about(`Folder mount refused: ${error.message}`),
          data: {
            ...who,
            path: request?.path ?? null,
            layout: request?.layout ?? null,
            reason: error.message,
          },
        });
        report(channel, `error ${error.message.replace(/\n/g, ' ')}\n`);
        channel.exit(1);
        channel.end();
      });
  }

  /** Ends every mount (gateway shutdown). */
  async closeAll(): Promise<void> {
    await Promise.all([...this.live.values()].map((mount) => this.end(mount)));
  }

  /** Unmounts what a previous run left under `root` (a crash leaves dead FUSE mounts behind). */
  static async sweep(root: string, log: Logger): Promise<void> {
    for (const point of mountsUnder(root)) {
      await lazyUnmount(point).catch((error: Error) => log.warn({ err: error, point }, 'unmounting failed'));
      await rmdir(point).catch(() => {});
    }
  }

  /** Mounts and places the folder; resolves once it is in place, with a promise of its end (wrapped: a
   * promise returned from an async function would be waited for). */
  private async mount(
    channel: ServerChannel,
    rest: Buffer,
    request: MountRequest,
    { hostId, shortId, linuxUser, traffic, remoteNode }: MountSession,
  ): Promise<{ ended: Promise<void> }> {
    if (remoteNode)
      throw new Error(
        `host ${shortId} runs on node ${remoteNode}, and only that node's gateway mounts folders into it; ` +
          `connect to that gateway's SSH port to mount folders`,
      );
    const hostDir = await this.options.runtime.folderMountDir(hostId);
    if (!hostDir)
      throw new Error(
        'this workspace has no folder mount support (the gateway machine does not propagate mounts, or the ' +
          'workspace was made before; stop and start the host after fixing the gateway)',
      );
    const owner = mountUser(this.options.user);
    const key = `${hostId}:${request.path}`;
    const previous = this.live.get(key);
    if (previous) await this.end(previous);

    // Stable per path, so that links a client made into an earlier mount of the same folder keep working.
    const id = createHash('sha256').update(request.path).digest('hex').slice(0, 16);
    const mountPoint = path.join(hostDir, id);
    const source = `${MOUNTS_IN_WORKSPACE}/${id}`;
    if (isMountPoint(mountPoint)) await lazyUnmount(mountPoint);
    // The gateway's folder of all hosts' mounts; the workspace reaches its own host's folder by a bind mount.
    await closeMountTree(path.dirname(hostDir), owner.gid);
    await mkdir(mountPoint, { recursive: true });
    await chown(mountPoint, owner.uid, owner.gid);
    await chmod(mountPoint, 0o700);

    const { workspaceUid } = this.options;
    // allow_other lets the workspace's user in; default_permissions has the kernel check each file's mode
    // against who asks (files show as the workspace user's), as for any other folder of the machine.
    // no_contain_symlinks: sshfs's newer default (CVE-2026-47187) guards a client from its server's links, and
    // here the server is the user's own laptop, whose links the workspace must follow (npm's node_modules/.bin
    // links are `../pkg/...`); they resolve in the workspace's own namespace, and the links the workspace makes
    // are held to safe shapes by ccp.
    const links = (await sshfsHasContainSymlinks()) ? ',no_contain_symlinks' : '';
    const child = spawn(
      'setpriv',
      [
        `--reuid=${owner.uid}`,
        `--regid=${owner.gid}`,
        '--clear-groups',
        'sshfs',
        '-f',
        '-o',
        `passive,allow_other,default_permissions,uid=${workspaceUid},gid=${workspaceUid},dir_cache=no,noatime${links}`,
        `:${request.path}`,
        mountPoint,
      ],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString('utf8')).slice(-2000);
    });
    // A spawn that fails (EAGAIN under load) is an error event: heard, it is this mount's failure, not the process's.
    child.on('error', (error) => {
      stderr = `${stderr}could not run sshfs: ${error.message}\n`.slice(-2000);
    });
    const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
    const mount: LiveMount = { key, mountPoint, child, closed };
    this.live.set(key, mount);
    if (rest.length > 0) child.stdin.write(rest);
    channel.pipe(child.stdin);
    child.stdout.on('data', (chunk: Buffer) => {
      traffic.toClient += chunk.length;
    });
    child.stdout.pipe(channel, { end: false });
    child.stdin.on('error', () => {});
    channel.on('error', () => {});

    let finished: Promise<void> | null = null;
    const finish = () => {
      finished ??= this.end(mount).then(async () => {
        await this.options.runtime
          .exec(hostId, ['sh', '-c', UNPLACE, 'sh', request.path, source], 10_000)
          .catch(() => null);
      });
      return finished;
    };
    const ended = new Promise<void>((resolve) => {
      channel.once('close', () => void finish().then(resolve));
      child.once('close', () => void finish().then(resolve));
    });
    child.once('close', () => {
      if (!channel.destroyed) {
        report(channel, `closed sshfs ended: ${stderr.trim() || 'no message'}\n`);
        channel.end();
      }
    });

    await waitForMount(mountPoint, closed, this.readyMs, () => stderr);
    const placed = await this.options.runtime.exec(
      hostId,
      ['sh', '-c', PLACE, 'sh', request.layout, request.path, source, linuxUser, id],
      this.readyMs,
    );
    if (placed?.exitCode !== 0) throw new Error(placed?.stderr.trim() || 'the workspace stopped');
    if (finished) {
      // The client left while the folder was being placed: the link made just now points at nothing.
      await finished;
      await this.options.runtime.exec(hostId, ['sh', '-c', UNPLACE, 'sh', request.path, source], 10_000);
      throw new Error('the client left before the folder was in place');
    }
    // The mount, then where the folder's path leads (the mount itself, or the copy the client fills).
    report(channel, `mounted ${source} ${placed.stdout.trim()}\n`);
    return { ended };
  }

  private async end(mount: LiveMount): Promise<void> {
    if (this.live.get(mount.key) === mount) this.live.delete(mount.key);
    if (mount.child.exitCode === null && mount.child.signalCode === null) mount.child.kill('SIGTERM');
    await Promise.race([mount.closed, new Promise((resolve) => setTimeout(resolve, 2000).unref())]);
    if (isMountPoint(mount.mountPoint)) await lazyUnmount(mount.mountPoint).catch(() => {});
    await rmdir(mount.mountPoint).catch(() => {});
  }
}

/** One status line to the client, unless its channel has already gone (a late write would be an error). */
function report(channel: ServerChannel, line: string): void {
  if (channel.stderr.writable) channel.stderr.write(line);
}

/** The JSON line the client sends first, and whatever arrived after it. */
function readHeader(channel: ServerChannel): Promise<{ request: MountRequest; rest: Buffer }> {
  return new Promise((resolve, reject) => {
    let buffered = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf(0x0a);
      if (end < 0) {
        if (buffered.length > HEADER_LIMIT) done(new Error('the mount request is too long'));
        return;
      }
      channel.pause();
      let request: Partial<MountRequest>;
      try {
        request = JSON.parse(buffered.subarray(0, end).toString('utf8')) as Partial<MountRequest>;
      } catch {
        return done(new Error('the mount request is not JSON'));
      }
      const problem =
        request.layout === 'link' || request.layout === 'directory'
          ? invalidMountPath(request.path as string)
          : 'layout must be "link" or "directory"';
      if (problem) return done(new Error(problem));
      done(null, { request: request as MountRequest, rest: buffered.subarray(end + 1) });
    };
    const onClose = () => done(new Error('the client closed the channel'));
    const done = (error: Error | null, value?: { request: MountRequest; rest: Buffer }) => {
      channel.off('data', onData);
      channel.off('close', onClose);
      if (error) reject(error);
      else resolve(value!);
    };
    channel.on('data', onData);
    channel.once('close', onClose);
  });
}

function mountUser(name: string): { uid: number; gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((entry) => entry.split(':')[0] === name);
  const [, , uid, gid] = line?.split(':') ?? [];
  if (!line || !uid || !gid)
    throw new Error(
      `folder mounts are not set up on the gateway (no user ${name}; deploy/setup.sh makes it)`,
    );
  return { uid: Number(uid), gid: Number(gid) };
}

async function waitForMount(
  mountPoint: string,
  closed: Promise<void>,
  timeoutMs: number,
  stderr: () => string,
): Promise<void> {
  let ended = false;
  void closed.then(() => {
    ended = true;
  });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (isMountPoint(mountPoint)) return;
    if (ended) throw new Error(`sshfs could not mount: ${stderr().trim() || 'it ended'}`);
    if (Date.now() > deadline) throw new Error(`sshfs did not mount within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function lazyUnmount(mountPoint: string): Promise<unknown> {
  return run('umount', ['-l', mountPoint]);
}

let containSymlinks: Promise<boolean> | null = null;

/** Whether this machine's sshfs has the contain_symlinks option (older ones refuse it as unknown). */
function sshfsHasContainSymlinks(): Promise<boolean> {
  containSymlinks ??= run('sshfs', ['-h']).then(
    ({ stdout, stderr }) => `${stdout}${stderr}`.includes('no_contain_symlinks'),
    (error: { stdout?: string; stderr?: string }) =>
      `${error.stdout ?? ''}${error.stderr ?? ''}`.includes('no_contain_symlinks'),
  );
  return containSymlinks;
}
