import { constants, type Stats } from 'node:fs';
import * as fs from 'node:fs/promises';
import path from 'node:path';
import ssh2, { type Attributes, type ClientChannel, type FileEntry, type SFTPWrapper } from 'ssh2';
import { isGitControlFile, isGitDirEntry, isInsideGitDir } from './git-control-files.js';
import { isWithin, linkRefusal, refusedLink, refusedMove } from './link-targets.js';
import { adoptChannelAsSftpServer } from './ssh2-internals.js';

const { STATUS_CODE, OPEN_MODE } = ssh2.utils.sftp;

type Handle =
  | { kind: 'file'; file: fs.FileHandle; gitControl: boolean }
  | { kind: 'dir'; dir: string; entries: string[] };

const WRITES = OPEN_MODE.WRITE | OPEN_MODE.APPEND | OPEN_MODE.CREAT | OPEN_MODE.TRUNC;
const GIT_CONTROL =
  'git config, hooks and .git entries are made on this machine only, not from the workspace';

function attrsOf(stats: Stats): Attributes {
  return {
    mode: stats.mode,
    uid: stats.uid,
    gid: stats.gid,
    size: stats.size,
    atime: Math.floor(stats.atimeMs / 1000),
    mtime: Math.floor(stats.mtimeMs / 1000),
  };
}

function longname(name: string, stats: Stats): string {
  const type = stats.isDirectory() ? 'd' : stats.isSymbolicLink() ? 'l' : '-';
  const bits = (stats.mode & 0o777).toString(2).padStart(9, '0');
  const perms = [...'rwxrwxrwx'].map((c, i) => (bits[i] === '1' ? c : '-')).join('');
  return `${type}${perms} 1 ${stats.uid} ${stats.gid} ${stats.size} ${new Date(stats.mtimeMs).toUTCString()} ${name}`;
}

function openFlags(flags: number): number {
  // The path given is already resolved; a symlink in its place now would be a race to get outside.
  let mode = constants.O_NOFOLLOW;
  const read = (flags & OPEN_MODE.READ) !== 0;
  const write = (flags & OPEN_MODE.WRITE) !== 0 || (flags & OPEN_MODE.APPEND) !== 0;
  mode |= read && write ? constants.O_RDWR : write ? constants.O_WRONLY : constants.O_RDONLY;
  if (flags & OPEN_MODE.APPEND) mode |= constants.O_APPEND;
  if (flags & OPEN_MODE.CREAT) mode |= constants.O_CREAT;
  if (flags & OPEN_MODE.TRUNC) mode |= constants.O_TRUNC;
  if (flags & OPEN_MODE.EXCL) mode |= constants.O_EXCL;
  return mode;
}

function statusOf(error: unknown): number {
  switch ((error as NodeJS.ErrnoException).code) {
    case 'ENOENT':
      return STATUS_CODE.NO_SUCH_FILE;
    case 'EACCES':
    case 'EPERM':
      return STATUS_CODE.PERMISSION_DENIED;
    default:
      return STATUS_CODE.FAILURE;
  }
}

/**
 * Serves the local folder `root` over SFTP on a channel whose other end is `sshfs -o passive` in the workspace
 * (reverse sshfs). Only paths inside `root` are served; anything else is refused.
 */
export class FolderSftpServer {
  private readonly handles = new Map<number, Handle>();
  private nextHandle = 1;

  private readonly root: string;

  constructor(root: string) {
    this.root = path.resolve(root);
  }

  attach(
    client: Parameters<typeof adoptChannelAsSftpServer>[0],
    channel: ClientChannel,
    onStderr?: (chunk: Buffer) => void,
  ): SFTPWrapper {
    const sftp = adoptChannelAsSftpServer(client, channel, onStderr);
    this.serve(sftp);
    sftp.on('close', () => this.closeAll());
    return sftp;
  }

  private inside(requested: string): string | null {
    const resolved = path.resolve(this.root, requested);
    return isWithin(this.root, resolved) ? resolved : null;
  }

  /**
   * The real path to act on, or null when it leads outside the folder. The path is resolved the way the
   * kernel does, one component at a time from the folder's real root: each link on the way (the last one too
   * when `follow`) is resolved where it is, and a `..` goes up from where the path got to, not from the text
   * before it (`up/..` with `up -> ..` is the folder's parent). Requests come one at a time, and only they
   * (and hot sync, which makes no link out) change the folder from the workspace, so the answer still holds
   * when the request acts.
   */
  private async confined(requested: string, follow: boolean): Promise<string | null> {
    const parts = this.partsOf(requested);
    if (!parts) return null;
    const realRoot = await fs.realpath(this.root);
    let at = realRoot;
    for (const [index, part] of parts.entries()) {
      const last = index === parts.length - 1;
      if (part === '..') {
        if (at === realRoot) return null;
        at = path.dirname(at);
        continue;
      }
      const next = path.join(at, part);
      if (last && !follow) return next;
      // A missing last component is a name to create; a missing folder on the way is the request's error.
      at = await fs.realpath(next).catch((error: NodeJS.ErrnoException) => {
        if (last && error.code === 'ENOENT') return next;
        throw error;
      });
      if (!isWithin(realRoot, at)) return null;
    }
    return at;
  }

  /** The components of `requested` below the folder (absolute, or relative to it), or null if not below it. */
  private partsOf(requested: string): string[] | null {
    let rest = requested;
    if (path.isAbsolute(requested)) {
      if (!isWithin(this.root, requested)) return null;
      rest = requested.slice(this.root.length);
    }
    return rest.split(path.sep).filter((part) => part !== '' && part !== '.');
  }

  /** The folder-relative form of a path `confined` returned, for the git checks. */
  private async relative(real: string): Promise<string> {
    return path.relative(await fs.realpath(this.root), real);
  }

  private handleBuffer(handle: Handle): Buffer {
    const id = this.nextHandle++;
    this.handles.set(id, handle);
    const buffer = Buffer.alloc(4);
    buffer.writeUInt32BE(id);
    return buffer;
  }

  private handleOf(buffer: Buffer): [number, Handle | undefined] {
    const id = buffer.length === 4 ? buffer.readUInt32BE(0) : -1;
    return [id, this.handles.get(id)];
  }

  private closeAll(): void {
    for (const handle of this.handles.values())
      if (handle.kind === 'file') void handle.file.close().catch(() => {});
    this.handles.clear();
  }

  private serve(sftp: SFTPWrapper): void {
    /**
     * Runs one request after the previous one has finished, in the order they came, as OpenSSH's sftp-server
     * does: sshfs sends an OPEN that creates a file and a STAT of it together, and expects them in order. A
     * path outside the folder is refused; a thrown error becomes the request's SFTP status.
     */
    let queue = Promise.resolve();
    const on = <A extends unknown[]>(event: string, work: (reqId: number, ...args: A) => Promise<void>) => {
      sftp.on(event, (reqId: number, ...args: A) => {
        queue = queue.then(() =>
          work(reqId, ...args).catch((error) =>
            sftp.status(reqId, statusOf(error), (error as Error).message),
          ),
        );
      });
    };
    const within = async (reqId: number, requested: string, follow = true): Promise<string | null> => {
      const local = await this.confined(requested, follow);
      if (!local) sftp.status(reqId, STATUS_CODE.PERMISSION_DENIED, 'outside the mounted folder');
      return local;
    };
    const ok = (reqId: number) => sftp.status(reqId, STATUS_CODE.OK);
    /** Refuses a change that would make git run something on this machine (git-control-files.ts). */
    const gitControlled = async (reqId: number, local: string, test: (relative: string) => boolean) => {
      if (!test(await this.relative(local))) return false;
      sftp.status(reqId, STATUS_CODE.PERMISSION_DENIED, GIT_CONTROL);
      return true;
    };

    on('REALPATH', async (reqId, requested: string) => {
      const local = this.inside(requested === '' || requested === '.' ? this.root : requested) ?? this.root;
      sftp.name(reqId, [{ filename: local, longname: local, attrs: {} as Attributes }]);
    });
    on('STAT', async (reqId, requested: string) => {
      const local = await within(reqId, requested);
      if (local) sftp.attrs(reqId, attrsOf(await fs.stat(local)));
    });
    on('LSTAT', async (reqId, requested: string) => {
      const local = await within(reqId, requested, false);
      if (local) sftp.attrs(reqId, attrsOf(await fs.lstat(local)));
    });
    on('OPEN', async (reqId, requested: string, flags: number, attrs: Attributes) => {
      const local = await within(reqId, requested);
      if (!local) return;
      const gitControl = isGitControlFile(await this.relative(local));
      const writes = (flags & WRITES) !== 0;
      if (writes && (await gitControlled(reqId, local, (rel) => gitControl || isGitDirEntry(rel)))) return;
      const file = await fs.open(local, openFlags(flags), attrs?.mode ?? 0o644);
      sftp.handle(reqId, this.handleBuffer({ kind: 'file', file, gitControl }));
    });
    on('READ', async (reqId, buffer: Buffer, offset: number, length: number) => {
      const [, handle] = this.handleOf(buffer);
      if (handle?.kind !== 'file') return sftp.status(reqId, STATUS_CODE.FAILURE, 'bad handle');
      const data = Buffer.alloc(Math.min(length, 256 * 1024));
      const { bytesRead } = await handle.file.read(data, 0, data.length, offset);
      if (bytesRead === 0) sftp.status(reqId, STATUS_CODE.EOF);
      else sftp.data(reqId, data.subarray(0, bytesRead));
    });
    on('WRITE', async (reqId, buffer: Buffer, offset: number, data: Buffer) => {
      const [, handle] = this.handleOf(buffer);
      if (handle?.kind !== 'file') return sftp.status(reqId, STATUS_CODE.FAILURE, 'bad handle');
      await handle.file.write(data, 0, data.length, offset);
      ok(reqId);
    });
    on('FSTAT', async (reqId, buffer: Buffer) => {
      const [, handle] = this.handleOf(buffer);
      if (handle?.kind === 'file') sftp.attrs(reqId, attrsOf(await handle.file.stat()));
      else if (handle?.kind === 'dir') sftp.attrs(reqId, attrsOf(await fs.stat(handle.dir)));
      else sftp.status(reqId, STATUS_CODE.FAILURE, 'bad handle');
    });
    on('FSETSTAT', async (reqId, buffer: Buffer, attrs: Attributes) => {
      const [, handle] = this.handleOf(buffer);
      if (handle?.kind !== 'file') return sftp.status(reqId, STATUS_CODE.FAILURE, 'bad handle');
      if (handle.gitControl) return sftp.status(reqId, STATUS_CODE.PERMISSION_DENIED, GIT_CONTROL);
      if (attrs.size !== undefined) await handle.file.truncate(attrs.size);
      if (attrs.mode !== undefined) await handle.file.chmod(attrs.mode & 0o7777);
      if (attrs.mtime !== undefined) await handle.file.utimes(attrs.atime ?? attrs.mtime, attrs.mtime);
      ok(reqId);
    });
    on('SETSTAT', async (reqId, requested: string, attrs: Attributes) => {
      const local = await within(reqId, requested);
      if (!local || (await gitControlled(reqId, local, isGitControlFile))) return;
      if (attrs.size !== undefined) await fs.truncate(local, attrs.size);
      if (attrs.mode !== undefined) await fs.chmod(local, attrs.mode & 0o7777);
      if (attrs.mtime !== undefined) await fs.utimes(local, attrs.atime ?? attrs.mtime, attrs.mtime);
      ok(reqId);
    });
    on('CLOSE', async (reqId, buffer: Buffer) => {
      const [id, handle] = this.handleOf(buffer);
      if (!handle) return sftp.status(reqId, STATUS_CODE.FAILURE, 'bad handle');
      this.handles.delete(id);
      if (handle.kind === 'file') await handle.file.close();
      ok(reqId);
    });
    on('OPENDIR', async (reqId, requested: string) => {
      const local = await within(reqId, requested);
      if (!local) return;
      if (!(await fs.stat(local)).isDirectory())
        return sftp.status(reqId, STATUS_CODE.FAILURE, 'not a folder');
      // Listed now: sshfs sends several READDIRs at once, and each must take a distinct part.
      const entries = ['.', '..', ...(await fs.readdir(local))];
      sftp.handle(reqId, this.handleBuffer({ kind: 'dir', dir: local, entries }));
    });
    on('READDIR', async (reqId, buffer: Buffer) => {
      const [, handle] = this.handleOf(buffer);
      if (handle?.kind !== 'dir') return sftp.status(reqId, STATUS_CODE.FAILURE, 'bad handle');
      const batch = handle.entries.splice(0, 100);
      if (batch.length === 0) return sftp.status(reqId, STATUS_CODE.EOF);
      const names: FileEntry[] = [];
      for (const name of batch) {
        const stats = await fs.lstat(path.join(handle.dir, name)).catch(() => null);
        if (stats) names.push({ filename: name, longname: longname(name, stats), attrs: attrsOf(stats) });
      }
      sftp.name(reqId, names);
    });
    on('REMOVE', async (reqId, requested: string) => {
      const local = await within(reqId, requested, false);
      if (local) await fs.unlink(local).then(() => ok(reqId));
    });
    on('RMDIR', async (reqId, requested: string) => {
      const local = await within(reqId, requested, false);
      if (local) await fs.rmdir(local).then(() => ok(reqId));
    });
    on('MKDIR', async (reqId, requested: string, attrs: Attributes) => {
      const local = await within(reqId, requested);
      if (!local || (await gitControlled(reqId, local, isGitControlFile))) return;
      await fs.mkdir(local, { mode: attrs?.mode ?? 0o755 }).then(() => ok(reqId));
    });
    on('RENAME', async (reqId, from: string, to: string) => {
      const source = await within(reqId, from, false);
      const target = source && (await within(reqId, to, false));
      if (!source || !target) return;
      // A folder moved into a git dir from outside it could bring a config, hooks or links along; a link
      // moved there is one made inside `.git`, which SYMLINK refuses.
      const moved = await fs.lstat(source);
      const folderFromOutside = !isInsideGitDir(await this.relative(source)) && moved.isDirectory();
      const intoGit = (rel: string) =>
        isGitControlFile(rel) ||
        isGitDirEntry(rel) ||
        ((folderFromOutside || moved.isSymbolicLink()) && isInsideGitDir(rel));
      if (await gitControlled(reqId, target, intoGit)) return;
      // A link's `..` are taken from where it is: moved (or its folder moved up), it could climb out.
      const why = await refusedMove(await fs.realpath(this.root), source, target);
      if (why) return sftp.status(reqId, STATUS_CODE.PERMISSION_DENIED, why);
      await fs.rename(source, target).then(() => ok(reqId));
    });
    on('READLINK', async (reqId, requested: string) => {
      const local = await within(reqId, requested, false);
      if (!local) return;
      const target = await fs.readlink(local);
      sftp.name(reqId, [{ filename: target, longname: target, attrs: {} as Attributes }]);
    });
    on('SYMLINK', async (reqId, targetPath: string, linkPath: string) => {
      const local = await within(reqId, linkPath, false);
      if (!local) return;
      const gitLink = (rel: string) => isGitDirEntry(rel) || isInsideGitDir(rel);
      if (await gitControlled(reqId, local, gitLink)) return;
      // A link that leads out of the folder would be followed by this machine's own programs (the user's
      // editor, git, hot sync), which the checks here never see: only links that stay within it are made.
      const why = await refusedLink(await fs.realpath(this.root), path.dirname(local), targetPath);
      if (why) return sftp.status(reqId, STATUS_CODE.PERMISSION_DENIED, linkRefusal(why));
      await fs.symlink(targetPath, local).then(() => ok(reqId));
    });
    on('EXTENDED', async (reqId) => {
      sftp.status(reqId, STATUS_CODE.OP_UNSUPPORTED);
    });
  }
}
