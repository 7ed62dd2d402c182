import { constants } from 'node:fs';
import * as fs from 'node:fs/promises';
import path from 'node:path';
import { coldSource, coldTarget, wantsColdLink } from './hot-sync-cold-link.js';
import { Moved } from './hot-sync-errors.js';
import type { SyncHistory } from './hot-sync-history.js';
import type { LocalScanner } from './hot-sync-local-scan.js';
import { type SyncPaths, tempName } from './hot-sync-paths.js';
import { pool } from './hot-sync-pool.js';
import type { RemoteScanner } from './hot-sync-remote-scan.js';
import { type Entry, signature } from './hot-sync-tree.js';
import { linkRefusal, refusedLink } from './link-targets.js';
import type { RemoteFs } from './remote-fs.js';

const CHUNK = 32 * 1024;
/** The most of a local file read at once. */
const LOCAL_CHUNK = 256 * 1024;

/**
 * A buffer for reading a local file of about `expectedBytes`: no larger than the file and one byte (so that
 * the read that finds its end needs no second buffer), nor than LOCAL_CHUNK. Sized to the file, as most files
 * of a project are a few KiB: a fixed 256 KiB zeroed for each made a restart's content comparison of 2,000
 * small files spend most of its CPU allocating. Not zeroed: only what a read filled is used.
 */
const localReadBuffer = (expectedBytes: number) =>
  Buffer.allocUnsafe(Math.min(LOCAL_CHUNK, Math.max(0, expectedBytes) + 1));

const seconds = (ms: number) => Math.floor(ms / 1000);

/** Copies everything `from` holds (about `expectedBytes`) into `to`, both open files of this machine. */
async function copyContent(from: fs.FileHandle, to: fs.FileHandle, expectedBytes: number): Promise<void> {
  const buffer = localReadBuffer(expectedBytes);
  for (let at = 0; ; ) {
    const { bytesRead } = await from.read(buffer, 0, buffer.length, at);
    if (bytesRead === 0) return;
    await to.write(buffer, 0, bytesRead, at);
    at += bytesRead;
  }
}

/** `20261122T031318Z`: sorts by time and is safe in a file name. */
function utcStamp(date = new Date()): string {
  return date
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
}

export interface TransferOptions {
  /** The workspace, over the session this pass runs on. */
  remote: RemoteFs;
  paths: SyncPaths;
  /** Each side as it is now, to check a place right before writing it. */
  local: LocalScanner;
  workspace: RemoteScanner;
  /** What both sides last agreed on: updated as each transfer completes. */
  base: SyncHistory;
  /** Where the workspace sees the local folder through sshfs (absolute, POSIX). */
  coldRoot: string;
  /** Files of this size or more are links to the sshfs layer instead of copies. */
  maxFileBytes: number;
  /** Both sides changed `rel`; the workspace's version was saved locally as `keptAs` (both relative). */
  onConflict?: (rel: string, keptAs: string) => void;
}

/**
 * Carries out one pass's decisions, path by path: each write goes to a temporary name and is renamed into
 * place only if the place is still as the scan saw it (else `Moved` is thrown). Counts what it copied.
 */
export class Transfers {
  /** Files transferred, either way, and their bytes; conflicts found. */
  copied = 0;
  bytes = 0;
  conflicts = 0;
  /** Folder removals, run by `removeFolders` after everything else (a kept file keeps its folder). */
  private readonly removals: Array<() => Promise<void>> = [];
  /**
   * Local folders found or made (writes in them still check them), and workspace folders checked to be real
   * (no link on the way out of the root).
   */
  private readonly knownLocalDirs = new Set<string>();
  private readonly checkedRemoteDirs = new Set<string>();
  private readonly remote: RemoteFs;
  private readonly paths: SyncPaths;
  private readonly local: LocalScanner;
  private readonly workspace: RemoteScanner;
  private readonly base: SyncHistory;

  constructor(private readonly options: TransferOptions) {
    this.remote = options.remote;
    this.paths = options.paths;
    this.local = options.local;
    this.workspace = options.workspace;
    this.base = options.base;
  }

  /** Runs the folder removals queued by this pass, children before parents. */
  async removeFolders(): Promise<void> {
    for (const removal of this.removals.reverse()) await removal();
  }

  /**
   * Makes sure the folder holding `rel` exists locally as a folder: missing folders are made one level at a
   * time, and a link on the way is refused. Each write checks its folder again (`checkedLocalPath`).
   */
  private async ensureLocalParent(rel: string): Promise<void> {
    const dir = path.posix.dirname(rel);
    if (dir === '.' || this.knownLocalDirs.has(dir)) return;
    let at = '';
    for (const part of dir.split('/')) {
      at = at ? `${at}/${part}` : part;
      const found = await this.local.entry(at);
      if (!found) {
        await fs.mkdir(await this.paths.checkedLocalPath(at));
        this.base.set(at, { local: 'd', remote: 'd' });
      } else if (found.type !== 'dir') throw new Error(`${at} is not a folder on this machine`);
    }
    this.knownLocalDirs.add(dir);
  }

  private async ensureRemoteParent(rel: string): Promise<void> {
    const dir = path.posix.dirname(rel);
    if (dir === '.' || this.checkedRemoteDirs.has(dir)) return;
    let at = '';
    for (const part of dir.split('/')) {
      at = at ? `${at}/${part}` : part;
      const found = await this.workspace.entry(at);
      if (!found) {
        await this.remote.mkdir(this.paths.remotePath(at), 0o755);
        this.base.set(at, { local: 'd', remote: 'd' });
      } else if (found.type !== 'dir') throw new Error(`${at} is not a folder in the workspace`);
    }
    const real = await this.remote.realpath(this.paths.remotePath(dir));
    if (real !== this.paths.realRemotePath(dir))
      throw new Error(`${dir} leads outside the folder in the workspace`);
    this.checkedRemoteDirs.add(dir);
  }

  /**
   * The other side no longer has `rel`: removes this side's entry, unless it changed since the scan. Folders
   * go after everything else, and only when empty (a file kept inside keeps its folder on both sides).
   */
  private async removeGone(
    rel: string,
    here: Entry | undefined,
    stillAsSeen: () => Promise<void>,
    side: { rmdir(): Promise<void>; unlink(): Promise<void>; gone(): Promise<boolean> },
  ): Promise<void> {
    if (here?.type === 'dir') {
      this.removals.push(async () => {
        await side.rmdir().catch(() => {});
        if (await side.gone()) this.base.delete(rel);
      });
    } else if (here) {
      await stillAsSeen();
      await side.unlink();
      this.base.delete(rel);
    }
  }

  /** Makes the workspace show the local entry `l` (or nothing). `r` is what the scan saw there. */
  async push(rel: string, l: Entry | undefined, r: Entry | undefined): Promise<void> {
    const where = this.paths.remotePath(rel);
    await this.ensureRemoteParent(rel);
    const expected = signature(r);
    const stillAsSeen = async () => {
      if (signature(await this.workspace.entry(rel)) !== expected) throw new Moved();
    };
    /** Moves a finished temporary entry into place, unless the place changed since the scan. */
    const place = async (temp: string) => {
      if (!r) {
        // Plain SFTP rename refuses an existing target: the check and the move are one step.
        await this.remote.renameNoReplace(temp, where).catch(async (error) => {
          throw (await this.remote.lstat(where).catch(() => null)) ? new Moved() : error;
        });
        return;
      }
      await stillAsSeen();
      if (r.type === 'dir') await this.remote.rmdir(where);
      await this.remote.rename(temp, where);
    };
    let written: string;
    if (!l) {
      const gone = async () => !(await this.remote.lstat(where).catch(() => true));
      return this.removeGone(rel, r, stillAsSeen, {
        rmdir: () => this.remote.rmdir(where),
        unlink: () => this.remote.unlink(where),
        gone,
      });
    }
    if (l.type === 'dir' && !l.ignored) {
      if (r?.type !== 'dir') {
        if (r) {
          await stillAsSeen();
          await this.remote.unlink(where);
        }
        await this.remote.mkdir(where, l.mode);
      }
      written = 'd';
    } else if (l.type === 'link' || wantsColdLink(l, this.options.maxFileBytes)) {
      const target = l.type === 'link' ? l.target : coldTarget(this.options.coldRoot, rel);
      const temp = this.paths.remotePath(tempName(rel));
      await this.remote.symlink(target, temp);
      try {
        await place(temp);
      } catch (error) {
        await this.remote.unlink(temp).catch(() => {});
        throw error;
      }
      written = `l:${target}`;
    } else {
      if (l.type !== 'file') return;
      written = await this.upload(rel, l, place);
      this.copied++;
      this.bytes += l.size;
    }
    this.base.set(rel, { local: signature(l) ?? '', remote: written });
  }

  /** Copies a local file to a temporary name beside its place, then renames it into place. */
  private async upload(
    rel: string,
    l: Extract<Entry, { type: 'file' }>,
    place: (temp: string) => Promise<void>,
  ): Promise<string> {
    const file = await fs.open(
      await this.paths.checkedLocalPath(rel),
      constants.O_RDONLY | constants.O_NOFOLLOW,
    );
    const temp = this.paths.remotePath(tempName(rel));
    let handle: Buffer | null = null;
    try {
      const opened = await file.stat();
      if (opened.size !== l.size || opened.mtimeMs !== l.mtime) throw new Moved();
      handle = await this.remote.open(temp, 'wx', { mode: 0o600 });
      const offsets: number[] = [];
      for (let at = 0; at < l.size; at += CHUNK) offsets.push(at);
      await pool(offsets, 16, async (at) => {
        const buffer = Buffer.alloc(Math.min(CHUNK, l.size - at));
        const { bytesRead } = await file.read(buffer, 0, buffer.length, at);
        if (bytesRead !== buffer.length) throw new Moved();
        await this.remote.write(handle as Buffer, buffer, at);
      });
      const mtime = seconds(l.mtime);
      await this.remote.fsetstat(handle, { mode: l.mode, atime: mtime, mtime });
      await this.remote.close(handle);
      handle = null;
      await place(temp);
      return `f:${l.size}:${mtime}:${l.mode.toString(8)}`;
    } catch (error) {
      if (handle) await this.remote.close(handle).catch(() => {});
      await this.remote.unlink(temp).catch(() => {});
      throw error;
    } finally {
      await file.close();
    }
  }

  /** Makes this machine show the workspace entry `r` (or nothing). `l` is what the scan saw here. */
  async pull(rel: string, l: Entry | undefined, r: Entry | undefined): Promise<void> {
    await this.ensureLocalParent(rel);
    const where = () => this.paths.checkedLocalPath(rel);
    const expected = signature(l);
    const stillAsSeen = async () => {
      if (signature(await this.local.entry(rel)) !== expected) throw new Moved();
    };
    /** Moves a finished temporary entry (relative) into place, unless the place changed since the scan. */
    const place = async (temp: string) => {
      try {
        await stillAsSeen();
        if (l?.type === 'dir') await fs.rmdir(await where());
        await fs.rename(await this.paths.checkedLocalPath(temp), await where());
      } catch (error) {
        await this.removeLocalTemp(temp);
        throw error;
      }
    };
    if (!r) {
      return this.removeGone(rel, l, stillAsSeen, {
        rmdir: async () => fs.rmdir(await where()),
        unlink: async () => fs.unlink(await where()),
        gone: async () => !(await this.local.entry(rel).catch(() => true)),
      });
    }
    if (r.type === 'dir') {
      if (l?.type !== 'dir') {
        if (l) {
          await stillAsSeen();
          await fs.unlink(await where());
        }
        await fs.mkdir(await where(), { mode: r.mode });
      }
      this.base.set(rel, { local: 'd', remote: 'd' });
      return;
    }
    if (r.type === 'link' && !coldSource(this.options.coldRoot, rel, r)) {
      const temp = tempName(rel);
      const linkAt = await this.paths.checkedLocalPath(temp);
      // `decide` refused targets that climb out or are absolute; here, where the kernel resolves it now.
      const why = await refusedLink(this.paths.realLocalRoot, path.dirname(linkAt), r.target);
      if (why) throw new Error(linkRefusal(why));
      await fs.symlink(r.target, linkAt);
      await place(temp);
      this.base.set(rel, { local: `l:${r.target}`, remote: `l:${r.target}` });
      return;
    }
    const { temp, size } = await this.fetch(rel, r);
    await place(temp);
    this.copied++;
    this.bytes += size;
    const now = await this.local.entry(rel);
    this.base.set(rel, { local: signature(now) ?? '', remote: signature(r) ?? '' });
    // A file made in the workspace at or over the limit is served from here through sshfs from now on.
    if (now && wantsColdLink(now, this.options.maxFileBytes)) await this.push(rel, now, r);
  }

  /**
   * The workspace's version of `rel` in a local temporary file beside it (returned relative to the root): a
   * downloaded copy, or for a link into the sshfs layer a copy of the local file it shows.
   */
  private async fetch(rel: string, r: Entry): Promise<{ temp: string; size: number }> {
    if (r.type === 'file') return { temp: await this.download(rel, r), size: r.size };
    const source = coldSource(this.options.coldRoot, rel, r);
    if (!source) throw new Error(`${rel} in the workspace holds no content to copy`);
    // Not followed if it is a link: the workspace names the file, and must not get another one copied.
    const from = await fs
      .open(await this.paths.checkedLocalPath(source), constants.O_RDONLY | constants.O_NOFOLLOW)
      .catch(() => null);
    const stats = await from?.stat();
    if (!from || !stats?.isFile()) {
      await from?.close();
      throw new Error(`${rel} in the workspace links to ${source} through sshfs, which is not a file here`);
    }
    const temp = tempName(rel);
    try {
      const copy = await this.createLocalTemp(temp);
      try {
        await copyContent(from, copy, stats.size);
        await copy.chmod(stats.mode & 0o777);
        await copy.utimes(stats.atime, stats.mtime);
      } finally {
        await copy.close();
      }
      return { temp, size: stats.size };
    } catch (error) {
      await this.removeLocalTemp(temp);
      throw error;
    } finally {
      await from.close();
    }
  }

  /** A new temporary file at `temp` (relative), for writing; never one that was there, nor a link. */
  private async createLocalTemp(temp: string): Promise<fs.FileHandle> {
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL;
    return fs.open(await this.paths.checkedLocalPath(temp), flags, 0o600);
  }

  private async removeLocalTemp(temp: string): Promise<void> {
    await this.paths
      .checkedLocalPath(temp)
      .then(fs.unlink)
      .catch(() => {});
  }

  /** Copies a workspace file to a temporary name beside its local place; returns that name (relative). */
  private async download(rel: string, r: Extract<Entry, { type: 'file' }>): Promise<string> {
    const temp = tempName(rel);
    const handle = await this.remote.open(this.paths.remotePath(rel), 'r');
    const file = await this.createLocalTemp(temp).catch(async (error) => {
      await this.remote.close(handle).catch(() => {});
      throw error;
    });
    try {
      // Opening follows a link; the handle must be the very file the scan saw.
      const opened = await this.remote.fstat(handle);
      if (!opened.isFile() || opened.size !== r.size || opened.mtime !== r.mtime) throw new Moved();
      const offsets: number[] = [];
      for (let at = 0; at < r.size; at += CHUNK) offsets.push(at);
      await pool(offsets, 16, async (at) => {
        const buffer = Buffer.alloc(Math.min(CHUNK, r.size - at));
        let filled = 0;
        while (filled < buffer.length) {
          const got = await this.remote.read(
            handle,
            buffer.subarray(filled),
            buffer.length - filled,
            at + filled,
          );
          if (got === 0) throw new Moved();
          filled += got;
        }
        await file.write(buffer, 0, buffer.length, at);
      });
      await file.chmod(r.mode);
      await file.utimes(r.mtime, r.mtime);
      return temp;
    } catch (error) {
      await this.removeLocalTemp(temp);
      throw error;
    } finally {
      await file.close();
      await this.remote.close(handle).catch(() => {});
    }
  }

  /**
   * Both sides changed `rel` and the workspace holds content there (a file, or a link showing another local
   * file). Same content is no conflict; otherwise the workspace's version is saved locally as
   * `<name>.ccp-conflict-<UTC stamp>` and the local version wins.
   */
  async conflict(rel: string, l: Entry, r: Entry): Promise<void> {
    await this.ensureLocalParent(rel);
    const { temp, size } = await this.fetch(rel, r);
    // Equal size and time could still be different edits made in the same second: the content decides.
    if (l.type === 'file' && l.size === size && (await this.sameContent(temp, rel, size))) {
      await this.removeLocalTemp(temp);
      this.base.set(rel, { local: signature(l) ?? '', remote: signature(r) ?? '' });
      return;
    }
    let keptAs = `${rel}.ccp-conflict-${utcStamp()}`;
    for (let n = 2; await this.local.entry(keptAs); n++) keptAs = `${rel}.ccp-conflict-${utcStamp()}-${n}`;
    await fs.rename(await this.paths.checkedLocalPath(temp), await this.paths.checkedLocalPath(keptAs));
    this.conflicts++;
    this.options.onConflict?.(rel, keptAs);
    const saved = await this.local.entry(keptAs);
    await this.push(keptAs, saved, undefined);
    await this.push(rel, l, r);
  }

  /** Whether the local files `a` and `b` (relative, about `expectedBytes` each) hold the same bytes. */
  private async sameContent(a: string, b: string, expectedBytes: number): Promise<boolean> {
    const open = async (rel: string) =>
      fs.open(await this.paths.checkedLocalPath(rel), constants.O_RDONLY | constants.O_NOFOLLOW);
    const x = await open(a);
    const y = await open(b).catch(async (error) => {
      await x.close();
      throw error;
    });
    try {
      const bx = localReadBuffer(expectedBytes);
      const by = localReadBuffer(expectedBytes);
      for (let at = 0; ; at += bx.length) {
        const [rx, ry] = await Promise.all([x.read(bx, 0, bx.length, at), y.read(by, 0, by.length, at)]);
        if (
          rx.bytesRead !== ry.bytesRead ||
          !bx.subarray(0, rx.bytesRead).equals(by.subarray(0, ry.bytesRead))
        )
          return false;
        if (rx.bytesRead === 0) return true;
      }
    } finally {
      await Promise.all([x.close(), y.close()]);
    }
  }
}
