import * as fs from 'node:fs/promises';
import path from 'node:path';
import type { SFTPWrapper } from 'ssh2';
import { coldSource } from './hot-sync-cold-link.js';
import { decide } from './hot-sync-decide.js';
import { Detached, Moved } from './hot-sync-errors.js';
import { newHistoryId, readHistoryFile, SyncHistory, writeHistoryFile } from './hot-sync-history.js';
import { LocalScanner } from './hot-sync-local-scan.js';
import { isPlainName, SyncPaths } from './hot-sync-paths.js';
import { CONCURRENCY, pool } from './hot-sync-pool.js';
import { RemoteScanner } from './hot-sync-remote-scan.js';
import type { ScanListener } from './hot-sync-scan.js';
import { Transfers } from './hot-sync-transfer.js';
import { type Entry, signature, type Tree } from './hot-sync-tree.js';
import { LocalWatcher } from './hot-sync-watcher.js';
import { RemoteFs } from './remote-fs.js';

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

/**
 * Beside the workspace copy, a link whose target is the id of the history file that describes the copy: a
 * copy made afresh, or last synced by another machine, does not match, and the history is not used.
 */
const SYNC_ID_SUFFIX = '.ccp-sync-id';
const DEBOUNCE_MS = 150;

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
  private readonly paths: SyncPaths;
  private readonly localScanner: LocalScanner;
  /** Paths changed locally since they were last looked at (kept while detached). */
  private readonly dirty = new Set<string>();
  private readonly watcher: LocalWatcher;
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
    this.paths = new SyncPaths(this.options.localRoot, this.options.remoteRoot);
    this.localScanner = new LocalScanner(this.paths, this.ignore, this.scanListener('local'));
    this.watcher = new LocalWatcher(this.paths, this.ignore, {
      onChange: (rel) => this.markDirty(rel),
      onNotice: (text) => this.notice(text),
    });
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
    await this.paths.resolveRoots(this.remote);
    if (!this.attachedOnce) await this.restoreHistory(this.remote);
    const summary = await this.enqueue(() => this.fullPass());
    if (!this.attachedOnce) {
      this.attachedOnce = true;
      this.watcher.start();
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
    this.watcher.close();
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

  // ---- scanning ------------------------------------------------------------------------------------------

  /** Where a scan of one side reports what it finds besides the entries. */
  private scanListener(side: 'local' | 'remote'): ScanListener {
    return {
      cannotList: (dir, error) => this.cannotList(dir, error),
      refusedName: (dir, name) =>
        this.refuseName(side === 'local' ? 'on this machine' : 'in the workspace', dir, name),
      staleTemp: (rel) => this.staleTemps.push({ side, rel }),
    };
  }

  /** Reads the workspace over `remote`, the session a pass runs on. */
  private remoteScanner(remote: RemoteFs): RemoteScanner {
    return new RemoteScanner(
      remote,
      this.paths,
      this.ignore,
      this.scanListener('remote'),
      () => this.remote === remote,
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
    const scanner = this.remoteScanner(remote);
    const local: Tree = new Map();
    const workspace: Tree = new Map();
    try {
      await Promise.all([this.localScanner.scan('', local), scanner.scan('', workspace)]);
      const transfers = await this.reconcile(remote, scanner, local, workspace, true);
      await this.keepHistory(remote);
      for (const { side, rel } of this.staleTemps)
        await (side === 'local'
          ? this.paths.checkedLocalPath(rel).then(fs.unlink)
          : remote.unlink(this.paths.remotePath(rel))
        ).catch(() => {});
      this.watcher.refresh(local);
      const oversized = [...local]
        .filter(([, e]) => e.type === 'file' && e.size >= this.options.maxFileBytes)
        .map(([rel, e]) => ({ path: rel, size: (e as { size: number }).size }));
      return {
        filesCopied: transfers.copied,
        bytes: transfers.bytes,
        conflicts: transfers.conflicts,
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
    const scanner = this.remoteScanner(remote);
    const local: Tree = new Map();
    const workspace: Tree = new Map();
    try {
      for (const rel of rels) {
        await this.localScanner.scan(rel, local);
        await scanner.scan(rel, workspace);
      }
      const scope = new Set(rels);
      for (const rel of [...local.keys(), ...workspace.keys()]) scope.add(rel);
      await this.reconcile(remote, scanner, local, workspace, false, scope);
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
    scanner: RemoteScanner,
    local: Tree,
    workspace: Tree,
    full: boolean,
    scope?: Set<string>,
  ): Promise<Transfers> {
    const transfers = new Transfers({
      remote,
      paths: this.paths,
      local: this.localScanner,
      workspace: scanner,
      base: this.base,
      coldRoot: this.options.coldRoot,
      maxFileBytes: this.options.maxFileBytes,
      onConflict: this.options.onConflict,
    });
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
        await this.syncPath(transfers, rel, local.get(rel), workspace.get(rel));
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
    await transfers.removeFolders();
    return transfers;
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
    transfers: Transfers,
    rel: string,
    l: Entry | undefined,
    r: Entry | undefined,
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
        return transfers.push(rel, l, r);
      case 'pull':
        if (action.notice) this.notice(action.notice);
        return transfers.pull(rel, l, r);
      case 'conflict':
        return transfers.conflict(rel, action.local, action.remote);
    }
  }

  /** Says `text` about `rel` once, not on every poll that finds the same situation. */
  private problemOnce(rel: string, text: string): void {
    if (this.reported.get(rel) === text) return;
    this.reported.set(rel, text);
    this.notice(text);
  }

  // ---- local change notifications -------------------------------------------------------------------------

  /** Remembers a local change, and looks at what changed soon after (several changes in one pass). */
  private markDirty(rel: string): void {
    if (this.stopped) return;
    this.dirty.add(rel);
    if (this.dirtyTimer || !this.remote) return;
    this.dirtyTimer = setTimeout(() => {
      this.dirtyTimer = null;
      void this.enqueue(() => this.partialPass()).catch(() => {});
    }, DEBOUNCE_MS);
    this.dirtyTimer.unref();
  }
}
