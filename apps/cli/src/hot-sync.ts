import { randomBytes } from 'node:crypto';
import { constants, type FSWatcher, watch } from 'node:fs';
import * as fs from 'node:fs/promises';
import path from 'node:path';
import type { SFTPWrapper, Stats } from 'ssh2';
import { coldSource, coldTarget, wantsColdLink } from './hot-sync-cold-link.js';
import { decide } from './hot-sync-decide.js';
import { newHistoryId, readHistoryFile, SyncHistory, writeHistoryFile } from './hot-sync-history.js';
import { isPlainName } from './hot-sync-paths.js';
import { type Entry, signature, type Tree } from './hot-sync-tree.js';
import { isMissing, RemoteFs } from './remote-fs.js';

/** Directories that are never copied: each becomes one link to the sshfs layer. */
export const DEFAULT_HOT_SYNC_IGNORE = ['.git', 'node_modules'] as const;

export interface HotSyncOptions {
  /** The local folder (absolute). */
  localRoot: string;
  /** The real directory in the workspace that shows the whole tree (absolute, POSIX). */
  remoteRoot: string;
  /** Where the workspace sees the local folder through sshfs (absolute, POSIX). */
  coldRoot: string;
  /** Files of this size or more are links to the sshfs layer instead of copies. */
  maxFileBytes: number;
  /** Directory names that are linked to the sshfs layer instead of walked. */
  ignore?: readonly string[];
  /** How often the workspace side is polled for changes (and the local side rescanned). */
  pollMs?: number;
  /**
   * A local file where what was last synced is kept between runs, so that a file deleted on one side while
   * ccp was not running is deleted on the other too rather than brought back. Without it, each run starts
   * by comparing both sides' content.
   */
  historyFile?: string;
  /** Both sides changed `rel`; the workspace's version was saved locally as `keptAs` (both relative). */
  onConflict?: (rel: string, keptAs: string) => void;
  /** Something the user should know (a kept file, a paused deletion, an entry that could not be synced). */
  onNotice?: (text: string) => void;
}

export interface HotSyncSummary {
  /** Files transferred in this pass, either way, and their bytes. */
  filesCopied: number;
  bytes: number;
  /** Conflicts found in this pass. */
  conflicts: number;
  /** Files served through the sshfs layer (size at least the limit), after this pass. */
  filesLinked: number;
  /** Ignored directories linked to the sshfs layer, after this pass. */
  dirsLinked: number;
  /** The files over the limit, relative to the root. */
  oversized: Array<{ path: string; size: number }>;
}

const TEMP_PREFIX = '.ccp-tmp-';
/**
 * Beside the workspace copy, a link whose target is the id of the history file that describes the copy: a
 * copy made afresh, or last synced by another machine, does not match, and the history is not used.
 */
const SYNC_ID_SUFFIX = '.ccp-sync-id';
/** Requests in flight at once: enough to hide the round trip of a distant workspace. */
const CONCURRENCY = 16;
/** A temporary file this old was left by an interrupted transfer. */
const STALE_TEMP_MS = 15 * 60_000;
const CHUNK = 32 * 1024;
const DEBOUNCE_MS = 150;

const seconds = (ms: number) => Math.floor(ms / 1000);

/** Copies everything `from` holds into `to`, both open files of this machine. */
async function copyContent(from: fs.FileHandle, to: fs.FileHandle): Promise<void> {
  const buffer = Buffer.alloc(256 * 1024);
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

async function pool<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const runners = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await work(items[next++] as T);
  });
  await Promise.all(runners);
}

/** Thrown to end a pass when the SFTP channel went away; the base is left as it was for unfinished paths. */
class Detached extends Error {}

/** A path whose other side changed between the scan and the write: left for the next pass to judge. */
class Moved extends Error {}

interface Pass {
  copied: number;
  bytes: number;
  conflicts: number;
  /** Folder removals, run after everything else, children before parents (a kept file keeps its folder). */
  removals: Array<() => Promise<void>>;
}

/**
 * Two-way "hot sync" for `full` mount mode: the workspace directory `remoteRoot` holds real copies of the
 * local folder's small files and links into the sshfs layer (`coldRoot`) for large files and ignored
 * directories. Changes flow both ways; a path changed on both sides since the last sync keeps the local
 * version and saves the workspace's next to it, so nothing is lost silently.
 */
export class HotSync {
  private readonly options: Required<Omit<HotSyncOptions, 'onConflict' | 'onNotice' | 'historyFile'>> &
    Pick<HotSyncOptions, 'onConflict' | 'onNotice' | 'historyFile'>;
  private readonly ignore: Set<string>;
  private readonly base = new SyncHistory();
  /** The id shared by the history file and the workspace copy (null until one is written or matched). */
  private historyId: string | null = null;
  /** The history's change count when it was last saved. */
  private savedChanges = -1;
  private remote: RemoteFs | null = null;
  private sftp: SFTPWrapper | null = null;
  private realLocalRoot = '';
  private realRemoteRoot = '';
  /** Paths changed locally since they were last looked at (kept while detached). */
  private readonly dirty = new Set<string>();
  private readonly watchers = new Map<string, FSWatcher>();
  private queue: Promise<unknown> = Promise.resolve();
  private pollTimer: NodeJS.Timeout | null = null;
  private dirtyTimer: NodeJS.Timeout | null = null;
  private stopped = false;
  private attachedOnce = false;
  /** Set by the mass-delete guard: deletions in the workspace are no longer applied locally. */
  private deletionsHeld = false;
  /** The last error said about a path (cleared when it syncs), and situations already reported once. */
  private readonly lastProblem = new Map<string, string>();
  private readonly reported = new Map<string, string>();
  /**
   * Per pass: local folders found or made (writes in them still check them), and workspace folders checked
   * to be real (no link on the way out of the root).
   */
  private knownLocalDirs = new Set<string>();
  private checkedRemoteDirs = new Set<string>();
  /** Per pass: folders that could not be listed (their contents are left alone), and leftover temp files. */
  private unreadable = new Set<string>();
  private staleTemps: Array<{ side: 'local' | 'remote'; rel: string }> = [];

  constructor(options: HotSyncOptions) {
    this.options = {
      ...options,
      localRoot: path.resolve(options.localRoot),
      remoteRoot: path.posix.normalize(options.remoteRoot).replace(/(.)\/$/, '$1'),
      coldRoot: path.posix.normalize(options.coldRoot).replace(/(.)\/$/, '$1'),
      ignore: options.ignore ?? DEFAULT_HOT_SYNC_IGNORE,
      pollMs: options.pollMs ?? 3000,
    };
    this.ignore = new Set(this.options.ignore);
  }

  /**
   * Starts syncing over `sftp` (a session on the workspace as its user). The first call makes the initial
   * two-way sync; later calls (after a reconnect) reconcile what changed meanwhile on either side.
   */
  async attach(sftp: SFTPWrapper): Promise<HotSyncSummary> {
    if (this.stopped) throw new Error('hot sync was stopped');
    this.detach();
    this.sftp = sftp;
    this.remote = new RemoteFs(sftp);
    sftp.once('close', () => {
      if (this.sftp === sftp) this.detach();
    });
    this.realLocalRoot = await fs.realpath(this.options.localRoot);
    this.realRemoteRoot = await this.remote.realpath(this.options.remoteRoot);
    if (!this.attachedOnce) await this.restoreHistory(this.remote);
    const summary = await this.enqueue(() => this.fullPass());
    if (!this.attachedOnce) {
      this.attachedOnce = true;
      this.startWatching();
    }
    return summary;
  }

  /** Whether an SFTP session is in use (false after `detach`, or once the session closed). */
  get attached(): boolean {
    return this.remote !== null;
  }

  /** Stops talking to the workspace; local changes are remembered until the next `attach`. */
  detach(): void {
    this.sftp = null;
    this.remote = null;
    if (this.pollTimer) clearTimeout(this.pollTimer);
    this.pollTimer = null;
  }

  /** One full two-way pass now (after any pass under way). Does nothing while detached. */
  async flush(): Promise<void> {
    if (!this.remote) return;
    await this.enqueue(() => this.fullPass());
  }

  /** Ends syncing for good: no more passes, watchers closed. Resolves once a pass under way has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.detach();
    if (this.dirtyTimer) clearTimeout(this.dirtyTimer);
    for (const watcher of this.watchers.values()) watcher.close();
    this.watchers.clear();
    await this.queue.catch(() => {});
  }

  private enqueue<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => {});
    return run;
  }

  private notice(text: string): void {
    this.options.onNotice?.(text);
  }

  private schedulePoll(): void {
    if (this.pollTimer) clearTimeout(this.pollTimer);
    this.pollTimer = null;
    if (this.stopped || !this.remote) return;
    this.pollTimer = setTimeout(() => {
      this.pollTimer = null;
      void this.enqueue(() => this.fullPass()).catch(() => {});
    }, this.options.pollMs);
    this.pollTimer.unref();
  }

  // ---- paths -------------------------------------------------------------------------------------------

  /** The parts of `rel`; a part that is not a plain name is refused, whatever the path came from. */
  private partsOf(rel: string): string[] {
    const parts = rel.split('/');
    if (!parts.every(isPlainName)) throw new Error(`${JSON.stringify(rel)} is not a path inside the folder`);
    return parts;
  }

  /** Where `rel` is on this machine, to look at; anything that changes it goes through `checkedLocalPath`. */
  private localPath(rel: string): string {
    return rel === '' ? this.options.localRoot : path.join(this.options.localRoot, ...this.partsOf(rel));
  }

  /**
   * Where to act on `rel` on this machine, resolved right before the act: its folder must be the same folder
   * under the real root, so that a link put in the local tree since the scan (the workspace can make links
   * here through sshfs) cannot lead a write, or a read sent to the workspace, outside the folder.
   */
  private async checkedLocalPath(rel: string): Promise<string> {
    const parts = this.partsOf(rel);
    const folder = path.join(this.realLocalRoot, ...parts.slice(0, -1));
    if ((await fs.realpath(folder)) !== folder)
      throw new Error(
        `${parts.slice(0, -1).join('/') || 'the folder'} leads outside the folder on this machine`,
      );
    return path.join(folder, parts.at(-1) as string);
  }

  private remotePath(rel: string): string {
    return rel === '' ? this.options.remoteRoot : path.posix.join(this.options.remoteRoot, rel);
  }

  private skipName(name: string): boolean {
    return name.startsWith(TEMP_PREFIX);
  }

  private tempName(rel: string): string {
    const dir = path.posix.dirname(rel);
    const name = `${TEMP_PREFIX}${randomBytes(6).toString('hex')}`;
    return dir === '.' ? name : `${dir}/${name}`;
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
      const found = await this.localEntry(at);
      if (!found) {
        await fs.mkdir(await this.checkedLocalPath(at));
        this.base.set(at, { local: 'd', remote: 'd' });
      } else if (found.type !== 'dir') throw new Error(`${at} is not a folder on this machine`);
    }
    this.knownLocalDirs.add(dir);
  }

  private async ensureRemoteParent(remote: RemoteFs, rel: string): Promise<void> {
    const dir = path.posix.dirname(rel);
    if (dir === '.' || this.checkedRemoteDirs.has(dir)) return;
    let at = '';
    for (const part of dir.split('/')) {
      at = at ? `${at}/${part}` : part;
      const found = await this.remoteEntry(remote, at);
      if (!found) {
        await remote.mkdir(this.remotePath(at), 0o755);
        this.base.set(at, { local: 'd', remote: 'd' });
      } else if (found.type !== 'dir') throw new Error(`${at} is not a folder in the workspace`);
    }
    const real = await remote.realpath(this.remotePath(dir));
    if (real !== path.posix.join(this.realRemoteRoot, dir))
      throw new Error(`${dir} leads outside the folder in the workspace`);
    this.checkedRemoteDirs.add(dir);
  }

  // ---- scanning ------------------------------------------------------------------------------------------

  private async localEntry(rel: string): Promise<Entry | undefined> {
    const stats = await fs.lstat(this.localPath(rel)).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT' || error.code === 'ENOTDIR') return null;
      throw error;
    });
    if (!stats) return undefined;
    if (stats.isFile())
      return { type: 'file', size: stats.size, mtime: stats.mtimeMs, mode: stats.mode & 0o777 };
    if (stats.isDirectory())
      return { type: 'dir', ignored: this.ignore.has(path.posix.basename(rel)), mode: stats.mode & 0o777 };
    if (stats.isSymbolicLink()) return { type: 'link', target: await fs.readlink(this.localPath(rel)) };
    return undefined;
  }

  private remoteEntryOf(rel: string, attrs: Stats, target?: string): Entry | undefined {
    if (attrs.isFile())
      return { type: 'file', size: attrs.size, mtime: attrs.mtime, mode: attrs.mode & 0o777 };
    if (attrs.isDirectory())
      return { type: 'dir', ignored: this.ignore.has(path.posix.basename(rel)), mode: attrs.mode & 0o777 };
    if (attrs.isSymbolicLink() && target !== undefined) return { type: 'link', target };
    return undefined;
  }

  private async remoteEntry(remote: RemoteFs, rel: string): Promise<Entry | undefined> {
    const attrs = await remote.lstat(this.remotePath(rel));
    if (!attrs) return undefined;
    const target = attrs.isSymbolicLink() ? await remote.readlink(this.remotePath(rel)) : undefined;
    return this.remoteEntryOf(rel, attrs, target);
  }

  /**
   * Everything under `start` (and `start` itself unless it is the root), breadth first: `entryOf` gives one
   * entry, `list` a folder's entries; ignored folders are not entered.
   */
  private async walk(
    start: string,
    tree: Tree,
    entryOf: (rel: string) => Promise<Entry | undefined>,
    list: (dir: string) => Promise<Array<[string, Entry]>>,
  ): Promise<void> {
    if (start !== '') {
      const first = await entryOf(start);
      if (!first) return;
      tree.set(start, first);
      if (first.type !== 'dir' || first.ignored) return;
    }
    let level = [start];
    while (level.length > 0) {
      const next: string[] = [];
      await pool(level, CONCURRENCY, async (dir) => {
        for (const [rel, entry] of await list(dir)) {
          tree.set(rel, entry);
          if (entry.type === 'dir' && !entry.ignored) next.push(rel);
        }
      });
      level = next;
    }
  }

  private scanLocal(start: string, tree: Tree): Promise<void> {
    return this.walk(
      start,
      tree,
      (rel) => this.localEntry(rel),
      async (dir) => {
        const names = await fs.readdir(this.localPath(dir)).catch((error: NodeJS.ErrnoException) => {
          if (error.code !== 'ENOENT') this.cannotList(dir, error);
          return [] as string[];
        });
        const entries = await Promise.all(
          names.map(async (name): Promise<[string, Entry] | null> => {
            if (!isPlainName(name)) {
              this.refuseName('on this machine', dir, name);
              return null;
            }
            const rel = dir === '' ? name : `${dir}/${name}`;
            if (this.skipName(name)) {
              const stats = await fs.lstat(this.localPath(rel)).catch(() => null);
              if (stats && !stats.isDirectory() && stats.mtimeMs < Date.now() - STALE_TEMP_MS)
                this.staleTemps.push({ side: 'local', rel });
              return null;
            }
            const entry = await this.localEntry(rel).catch(() => undefined);
            return entry ? [rel, entry] : null;
          }),
        );
        return entries.filter((entry) => entry !== null);
      },
    );
  }

  /** The same in the workspace, one directory listing per request, several at a time. */
  private scanRemote(remote: RemoteFs, start: string, tree: Tree): Promise<void> {
    return this.walk(
      start,
      tree,
      (rel) => this.remoteEntry(remote, rel),
      async (dir) => {
        let listing: Awaited<ReturnType<RemoteFs['readdir']>>;
        try {
          listing = await remote.readdir(this.remotePath(dir));
        } catch (error) {
          if (this.remote !== remote) throw new Detached();
          if (!isMissing(error)) this.cannotList(dir, error as Error);
          return [];
        }
        const entries = await Promise.all(
          listing
            .filter(({ name }) => {
              if (name === '.' || name === '..') return false;
              if (isPlainName(name)) return true;
              this.refuseName('in the workspace', dir, name);
              return false;
            })
            .map(async ({ name, attrs }): Promise<[string, Entry] | null> => {
              const rel = dir === '' ? name : `${dir}/${name}`;
              if (this.skipName(name)) {
                if (!attrs.isDirectory() && attrs.mtime * 1000 < Date.now() - STALE_TEMP_MS)
                  this.staleTemps.push({ side: 'remote', rel });
                return null;
              }
              const target = attrs.isSymbolicLink()
                ? await remote.readlink(this.remotePath(rel)).catch(() => undefined)
                : undefined;
              const entry = this.remoteEntryOf(rel, attrs, target);
              return entry ? [rel, entry] : null;
            }),
        );
        return entries.filter((entry) => entry !== null);
      },
    );
  }

  /**
   * A listed name that is not a plain name is skipped on both sides alike (skipped on one side only, it would
   * look deleted there), and said once; the name is quoted, as it may hold anything.
   */
  private refuseName(side: 'in the workspace' | 'on this machine', dir: string, name: string): void {
    const text = `${JSON.stringify(name)} listed in ${dir || 'the folder'} ${side} is not a plain file name; not synced`;
    this.problemOnce(text, text);
  }

  /** A folder that cannot be listed is not taken for empty: nothing under it is synced in this pass. */
  private cannotList(dir: string, error: Error): void {
    this.unreadable.add(dir);
    this.problemOnce(
      dir,
      `cannot list ${dir || 'the folder'}: ${error.message}; its contents are not synced`,
    );
  }

  // ---- passes --------------------------------------------------------------------------------------------

  private async fullPass(): Promise<HotSyncSummary> {
    const remote = this.remote;
    if (!remote) throw new Detached('not attached');
    this.dirty.clear();
    this.unreadable = new Set();
    this.staleTemps = [];
    const local: Tree = new Map();
    const workspace: Tree = new Map();
    try {
      await Promise.all([this.scanLocal('', local), this.scanRemote(remote, '', workspace)]);
      const stats = await this.reconcile(remote, local, workspace, true);
      await this.keepHistory(remote);
      for (const { side, rel } of this.staleTemps)
        await (side === 'local'
          ? this.checkedLocalPath(rel).then(fs.unlink)
          : remote.unlink(this.remotePath(rel))
        ).catch(() => {});
      this.refreshWatchers(local);
      const oversized = [...local]
        .filter(([, e]) => e.type === 'file' && e.size >= this.options.maxFileBytes)
        .map(([rel, e]) => ({ path: rel, size: (e as { size: number }).size }));
      return {
        filesCopied: stats.copied,
        bytes: stats.bytes,
        conflicts: stats.conflicts,
        filesLinked: oversized.length,
        dirsLinked: [...local.values()].filter((e) => e.type === 'dir' && e.ignored).length,
        oversized,
      };
    } finally {
      this.schedulePoll();
    }
  }

  /** Looks only at paths changed locally (and what is under them), on both sides. */
  private async partialPass(): Promise<void> {
    const remote = this.remote;
    if (!remote || this.dirty.size === 0) return;
    const rels = [...this.dirty];
    this.dirty.clear();
    this.unreadable = new Set();
    const local: Tree = new Map();
    const workspace: Tree = new Map();
    try {
      for (const rel of rels) {
        await this.scanLocal(rel, local);
        await this.scanRemote(remote, rel, workspace);
      }
      const scope = new Set(rels);
      for (const rel of [...local.keys(), ...workspace.keys()]) scope.add(rel);
      await this.reconcile(remote, local, workspace, false, scope);
      await this.keepHistory(remote);
    } catch (error) {
      for (const rel of rels) this.dirty.add(rel);
      throw error;
    }
  }

  // ---- history between runs -----------------------------------------------------------------------------

  private syncIdPath(): string {
    return `${this.options.remoteRoot}${SYNC_ID_SUFFIX}`;
  }

  /** Takes up the saved history when the workspace copy is the one it describes; otherwise starts afresh. */
  private async restoreHistory(remote: RemoteFs): Promise<void> {
    const file = this.options.historyFile;
    if (!file) return;
    const stored = await readHistoryFile(file, this.options.localRoot, this.options.remoteRoot);
    if (!stored) return;
    const copyId = await remote.readlink(this.syncIdPath()).catch(() => null);
    if (copyId !== stored.id) return;
    // An emptied copy (wiped, or made again) is not "everything deleted in the workspace".
    const listing = await remote.readdir(this.options.remoteRoot).catch(() => []);
    if (stored.paths.length > 0 && !listing.some(({ name }) => isPlainName(name))) return;
    this.base.replaceWith(stored.paths);
    this.historyId = stored.id;
    this.savedChanges = this.base.changes;
  }

  /**
   * Saves the history when it changed. A new history first gets its id written into the workspace copy; a
   * failure on the way leaves ids that do not match, and the next run compares content instead.
   */
  private async keepHistory(remote: RemoteFs): Promise<void> {
    const file = this.options.historyFile;
    if (!file || this.base.changes === this.savedChanges) return;
    const changes = this.base.changes;
    try {
      if (!this.historyId) {
        const id = newHistoryId();
        await remote.unlink(this.syncIdPath()).catch(() => {});
        await remote.symlink(id, this.syncIdPath());
        this.historyId = id;
      }
      await writeHistoryFile(file, {
        id: this.historyId,
        localRoot: this.options.localRoot,
        remoteRoot: this.options.remoteRoot,
        paths: this.base.toSave(),
      });
      this.savedChanges = changes;
    } catch (error) {
      if (this.remote !== remote) throw new Detached();
      this.problemOnce(
        SYNC_ID_SUFFIX,
        `cannot keep the sync history in ${file}: ${(error as Error).message}`,
      );
    }
  }

  /**
   * Decides and carries out what each path needs: creations of directories first (parents before
   * children), then files and links, then removals of directories (children before parents).
   */
  private async reconcile(
    remote: RemoteFs,
    local: Tree,
    workspace: Tree,
    full: boolean,
    scope?: Set<string>,
  ): Promise<Pass> {
    this.knownLocalDirs = new Set();
    this.checkedRemoteDirs = new Set();
    const stats: Pass = { copied: 0, bytes: 0, conflicts: 0, removals: [] };
    const rels = new Set(scope ?? [...local.keys(), ...workspace.keys(), ...this.base.keys()]);
    // Under an ignored directory or a link nothing is synced: such base records are left over.
    const sorted = [...rels].filter((rel) => !this.underUnsynced(rel, local, workspace)).sort();
    if (full) this.guardMassDeletion(sorted, local, workspace);

    const isFolder = (entry: Entry | undefined) => entry?.type === 'dir' && !entry.ignored;
    // Folders, and links showing another local file (a move in the workspace), go before any deletion: the
    // moved file's old path is deleted in the same pass.
    const early = (rel: string) =>
      isFolder(local.get(rel)) ||
      isFolder(workspace.get(rel)) ||
      coldSource(this.options.coldRoot, rel, workspace.get(rel)) !== null;
    const folders = sorted.filter(early);
    const rest = sorted.filter((rel) => !early(rel));
    const one = async (rel: string) => {
      try {
        await this.syncPath(remote, rel, local.get(rel), workspace.get(rel), stats);
        this.lastProblem.delete(rel);
      } catch (error) {
        if (!this.remote || this.remote !== remote) throw new Detached();
        if (error instanceof Moved) return;
        const message = (error as Error).message;
        if (this.lastProblem.get(rel) !== message) this.notice(`could not sync ${rel}: ${message}`);
        this.lastProblem.set(rel, message);
      }
    };
    for (const rel of folders) await one(rel);
    await pool(rest, CONCURRENCY, one);
    for (const removal of stats.removals.reverse()) await removal();
    return stats;
  }

  private underUnsynced(rel: string, local: Tree, workspace: Tree): boolean {
    if (this.unreadable.has('')) return true;
    for (let dir = path.posix.dirname(rel); dir !== '.'; dir = path.posix.dirname(dir)) {
      if (this.unreadable.has(dir)) return true;
      const l = local.get(dir);
      if (l?.type === 'link' || (l?.type === 'dir' && l.ignored)) return true;
      const r = workspace.get(dir);
      if (!l && (r?.type === 'link' || (r?.type === 'dir' && r.ignored))) return true;
    }
    return false;
  }

  /**
   * More than half of at least 10 synced files gone from the workspace in one poll looks like an accident
   * (a wiped folder), not edits: such deletions are no longer applied locally in this run.
   */
  private guardMassDeletion(rels: string[], local: Tree, workspace: Tree): void {
    let tracked = 0;
    let gone = 0;
    for (const rel of rels) {
      const base = this.base.get(rel);
      if (!base || base.local === 'd' || base.local === 'i') continue;
      tracked++;
      if (!workspace.has(rel) && local.has(rel)) gone++;
    }
    if (this.deletionsHeld || tracked < 10 || gone * 2 <= tracked) return;
    this.deletionsHeld = true;
    this.notice(
      `${gone} of ${tracked} synced files disappeared from ${this.options.remoteRoot} in the workspace at once; ` +
        'local copies are kept and deletions made in the workspace are no longer applied locally. ' +
        'Restart ccp to copy the missing files to the workspace again.',
    );
  }

  // ---- one path ------------------------------------------------------------------------------------------

  private async syncPath(
    remote: RemoteFs,
    rel: string,
    l: Entry | undefined,
    r: Entry | undefined,
    stats: Pass,
  ): Promise<void> {
    const action = decide(l, r, this.base.get(rel), {
      rel,
      coldRoot: this.options.coldRoot,
      maxFileBytes: this.options.maxFileBytes,
      deletionsHeld: this.deletionsHeld,
    });
    switch (action.kind) {
      case 'none':
        return;
      case 'forget':
        return this.base.delete(rel);
      case 'record':
        return this.base.set(rel, { local: signature(l) ?? '', remote: signature(r) ?? '' });
      case 'hold':
        return this.base.hold(rel);
      case 'leave':
        return this.problemOnce(rel, action.problem);
      case 'push':
        if (action.notice) this.notice(action.notice);
        return this.push(remote, rel, l, r, stats);
      case 'pull':
        if (action.notice) this.notice(action.notice);
        return this.pull(remote, rel, l, r, stats);
      case 'conflict':
        return this.conflict(remote, rel, action.local, action.remote, stats);
    }
  }

  /** Says `text` about `rel` once, not on every poll that finds the same situation. */
  private problemOnce(rel: string, text: string): void {
    if (this.reported.get(rel) === text) return;
    this.reported.set(rel, text);
    this.notice(text);
  }

  /**
   * The other side no longer has `rel`: removes this side's entry, unless it changed since the scan. Folders
   * go after everything else, and only when empty (a file kept inside keeps its folder on both sides).
   */
  private async removeGone(
    rel: string,
    here: Entry | undefined,
    stats: Pass,
    stillAsSeen: () => Promise<void>,
    side: { rmdir(): Promise<void>; unlink(): Promise<void>; gone(): Promise<boolean> },
  ): Promise<void> {
    if (here?.type === 'dir') {
      stats.removals.push(async () => {
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
  private async push(
    remote: RemoteFs,
    rel: string,
    l: Entry | undefined,
    r: Entry | undefined,
    stats: Pass,
  ): Promise<void> {
    const where = this.remotePath(rel);
    await this.ensureRemoteParent(remote, rel);
    const expected = signature(r);
    const stillAsSeen = async () => {
      if (signature(await this.remoteEntry(remote, rel)) !== expected) throw new Moved();
    };
    /** Moves a finished temporary entry into place, unless the place changed since the scan. */
    const place = async (temp: string) => {
      if (!r) {
        // Plain SFTP rename refuses an existing target: the check and the move are one step.
        await remote.renameNoReplace(temp, where).catch(async (error) => {
          throw (await remote.lstat(where).catch(() => null)) ? new Moved() : error;
        });
        return;
      }
      await stillAsSeen();
      if (r.type === 'dir') await remote.rmdir(where);
      await remote.rename(temp, where);
    };
    let written: string;
    if (!l) {
      const gone = async () => !(await remote.lstat(where).catch(() => true));
      return this.removeGone(rel, r, stats, stillAsSeen, {
        rmdir: () => remote.rmdir(where),
        unlink: () => remote.unlink(where),
        gone,
      });
    }
    if (l.type === 'dir' && !l.ignored) {
      if (r?.type !== 'dir') {
        if (r) {
          await stillAsSeen();
          await remote.unlink(where);
        }
        await remote.mkdir(where, l.mode);
      }
      written = 'd';
    } else if (l.type === 'link' || wantsColdLink(l, this.options.maxFileBytes)) {
      const target = l.type === 'link' ? l.target : coldTarget(this.options.coldRoot, rel);
      const temp = this.remotePath(this.tempName(rel));
      await remote.symlink(target, temp);
      try {
        await place(temp);
      } catch (error) {
        await remote.unlink(temp).catch(() => {});
        throw error;
      }
      written = `l:${target}`;
    } else {
      if (l.type !== 'file') return;
      written = await this.upload(remote, rel, l, place);
      stats.copied++;
      stats.bytes += l.size;
    }
    this.base.set(rel, { local: signature(l) ?? '', remote: written });
  }

  /** Copies a local file to a temporary name beside its place, then renames it into place. */
  private async upload(
    remote: RemoteFs,
    rel: string,
    l: Extract<Entry, { type: 'file' }>,
    place: (temp: string) => Promise<void>,
  ): Promise<string> {
    const file = await fs.open(await this.checkedLocalPath(rel), constants.O_RDONLY | constants.O_NOFOLLOW);
    const temp = this.remotePath(this.tempName(rel));
    let handle: Buffer | null = null;
    try {
      const opened = await file.stat();
      if (opened.size !== l.size || opened.mtimeMs !== l.mtime) throw new Moved();
      handle = await remote.open(temp, 'wx', { mode: 0o600 });
      const offsets: number[] = [];
      for (let at = 0; at < l.size; at += CHUNK) offsets.push(at);
      await pool(offsets, 16, async (at) => {
        const buffer = Buffer.alloc(Math.min(CHUNK, l.size - at));
        const { bytesRead } = await file.read(buffer, 0, buffer.length, at);
        if (bytesRead !== buffer.length) throw new Moved();
        await remote.write(handle as Buffer, buffer, at);
      });
      const mtime = seconds(l.mtime);
      await remote.fsetstat(handle, { mode: l.mode, atime: mtime, mtime });
      await remote.close(handle);
      handle = null;
      await place(temp);
      return `f:${l.size}:${mtime}:${l.mode.toString(8)}`;
    } catch (error) {
      if (handle) await remote.close(handle).catch(() => {});
      await remote.unlink(temp).catch(() => {});
      throw error;
    } finally {
      await file.close();
    }
  }

  /** Makes this machine show the workspace entry `r` (or nothing). `l` is what the scan saw here. */
  private async pull(
    remote: RemoteFs,
    rel: string,
    l: Entry | undefined,
    r: Entry | undefined,
    stats: Pass,
  ): Promise<void> {
    await this.ensureLocalParent(rel);
    const where = () => this.checkedLocalPath(rel);
    const expected = signature(l);
    const stillAsSeen = async () => {
      if (signature(await this.localEntry(rel)) !== expected) throw new Moved();
    };
    /** Moves a finished temporary entry (relative) into place, unless the place changed since the scan. */
    const place = async (temp: string) => {
      try {
        await stillAsSeen();
        if (l?.type === 'dir') await fs.rmdir(await where());
        await fs.rename(await this.checkedLocalPath(temp), await where());
      } catch (error) {
        await this.removeLocalTemp(temp);
        throw error;
      }
    };
    if (!r) {
      return this.removeGone(rel, l, stats, stillAsSeen, {
        rmdir: async () => fs.rmdir(await where()),
        unlink: async () => fs.unlink(await where()),
        gone: async () => !(await this.localEntry(rel).catch(() => true)),
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
      const temp = this.tempName(rel);
      await fs.symlink(r.target, await this.checkedLocalPath(temp));
      await place(temp);
      this.base.set(rel, { local: `l:${r.target}`, remote: `l:${r.target}` });
      return;
    }
    const { temp, size } = await this.fetch(remote, rel, r);
    await place(temp);
    stats.copied++;
    stats.bytes += size;
    const now = await this.localEntry(rel);
    this.base.set(rel, { local: signature(now) ?? '', remote: signature(r) ?? '' });
    // A file made in the workspace at or over the limit is served from here through sshfs from now on.
    if (now && wantsColdLink(now, this.options.maxFileBytes)) await this.push(remote, rel, now, r, stats);
  }

  /**
   * The workspace's version of `rel` in a local temporary file beside it (returned relative to the root): a
   * downloaded copy, or for a link into the sshfs layer a copy of the local file it shows.
   */
  private async fetch(remote: RemoteFs, rel: string, r: Entry): Promise<{ temp: string; size: number }> {
    if (r.type === 'file') return { temp: await this.download(remote, rel, r), size: r.size };
    const source = coldSource(this.options.coldRoot, rel, r);
    if (!source) throw new Error(`${rel} in the workspace holds no content to copy`);
    // Not followed if it is a link: the workspace names the file, and must not get another one copied.
    const from = await fs
      .open(await this.checkedLocalPath(source), constants.O_RDONLY | constants.O_NOFOLLOW)
      .catch(() => null);
    const stats = await from?.stat();
    if (!from || !stats?.isFile()) {
      await from?.close();
      throw new Error(`${rel} in the workspace links to ${source} through sshfs, which is not a file here`);
    }
    const temp = this.tempName(rel);
    try {
      const copy = await this.createLocalTemp(temp);
      try {
        await copyContent(from, copy);
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
    return fs.open(await this.checkedLocalPath(temp), flags, 0o600);
  }

  private async removeLocalTemp(temp: string): Promise<void> {
    await this.checkedLocalPath(temp)
      .then(fs.unlink)
      .catch(() => {});
  }

  /** Copies a workspace file to a temporary name beside its local place; returns that name (relative). */
  private async download(
    remote: RemoteFs,
    rel: string,
    r: Extract<Entry, { type: 'file' }>,
  ): Promise<string> {
    const temp = this.tempName(rel);
    const handle = await remote.open(this.remotePath(rel), 'r');
    const file = await this.createLocalTemp(temp).catch(async (error) => {
      await remote.close(handle).catch(() => {});
      throw error;
    });
    try {
      // Opening follows a link; the handle must be the very file the scan saw.
      const opened = await remote.fstat(handle);
      if (!opened.isFile() || opened.size !== r.size || opened.mtime !== r.mtime) throw new Moved();
      const offsets: number[] = [];
      for (let at = 0; at < r.size; at += CHUNK) offsets.push(at);
      await pool(offsets, 16, async (at) => {
        const buffer = Buffer.alloc(Math.min(CHUNK, r.size - at));
        let filled = 0;
        while (filled < buffer.length) {
          const got = await remote.read(handle, buffer.subarray(filled), buffer.length - filled, at + filled);
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
      await remote.close(handle).catch(() => {});
    }
  }

  /**
   * Both sides changed `rel` and the workspace holds content there (a file, or a link showing another local
   * file). Same content is no conflict; otherwise the workspace's version is saved locally as
   * `<name>.ccp-conflict-<UTC stamp>` and the local version wins.
   */
  private async conflict(remote: RemoteFs, rel: string, l: Entry, r: Entry, stats: Pass): Promise<void> {
    await this.ensureLocalParent(rel);
    const { temp, size } = await this.fetch(remote, rel, r);
    // Equal size and time could still be different edits made in the same second: the content decides.
    if (l.type === 'file' && l.size === size && (await this.sameContent(temp, rel))) {
      await this.removeLocalTemp(temp);
      this.base.set(rel, { local: signature(l) ?? '', remote: signature(r) ?? '' });
      return;
    }
    let keptAs = `${rel}.ccp-conflict-${utcStamp()}`;
    for (let n = 2; await this.localEntry(keptAs); n++) keptAs = `${rel}.ccp-conflict-${utcStamp()}-${n}`;
    await fs.rename(await this.checkedLocalPath(temp), await this.checkedLocalPath(keptAs));
    stats.conflicts++;
    this.options.onConflict?.(rel, keptAs);
    const saved = await this.localEntry(keptAs);
    await this.push(remote, keptAs, saved, undefined, stats);
    await this.push(remote, rel, l, r, stats);
  }

  /** Whether the local files `a` and `b` (relative) hold the same bytes. */
  private async sameContent(a: string, b: string): Promise<boolean> {
    const open = async (rel: string) =>
      fs.open(await this.checkedLocalPath(rel), constants.O_RDONLY | constants.O_NOFOLLOW);
    const x = await open(a);
    const y = await open(b).catch(async (error) => {
      await x.close();
      throw error;
    });
    try {
      const bx = Buffer.alloc(256 * 1024);
      const by = Buffer.alloc(bx.length);
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

  // ---- local change notifications -------------------------------------------------------------------------

  private markDirty(rel: string): void {
    if (this.stopped || rel.split('/').some((part) => this.skipName(part) || !isPlainName(part))) return;
    this.dirty.add(rel);
    if (this.dirtyTimer || !this.remote) return;
    this.dirtyTimer = setTimeout(() => {
      this.dirtyTimer = null;
      void this.enqueue(() => this.partialPass()).catch(() => {});
    }, DEBOUNCE_MS);
    this.dirtyTimer.unref();
  }

  private startWatching(): void {
    if (process.platform === 'linux') return; // one watcher per directory, kept by refreshWatchers
    try {
      const watcher = watch(this.options.localRoot, { recursive: true }, (_event, name) => {
        if (!name) return;
        const rel = name.split(path.sep).join('/');
        if (!rel.split('/').some((part) => this.ignore.has(part))) this.markDirty(rel);
      });
      watcher.on('error', () => watcher.close());
      this.watchers.set('', watcher);
    } catch {
      this.notice('local changes are found by rescanning only (the folder cannot be watched)');
    }
  }

  /**
   * Linux: a recursive watch would also watch every ignored directory (node_modules can be huge), so each
   * synced directory gets its own watcher instead. A failure (inotify limit) leaves the periodic rescan.
   */
  private refreshWatchers(local: Tree): void {
    if (process.platform !== 'linux' || this.stopped) return;
    const dirs = new Set(['']);
    for (const [rel, entry] of local) if (entry.type === 'dir' && !entry.ignored) dirs.add(rel);
    for (const [rel, watcher] of this.watchers)
      if (!dirs.has(rel)) {
        watcher.close();
        this.watchers.delete(rel);
      }
    for (const rel of dirs) {
      if (this.watchers.has(rel)) continue;
      try {
        const watcher = watch(this.localPath(rel), (_event, name) => {
          if (name) this.markDirty(rel === '' ? String(name) : `${rel}/${name}`);
        });
        watcher.on('error', () => {
          watcher.close();
          this.watchers.delete(rel);
        });
        this.watchers.set(rel, watcher);
      } catch {
        // Gone meanwhile, or out of watches: the periodic rescan covers it.
      }
    }
  }
}
