import { type FSWatcher, watch } from 'node:fs';
import path from 'node:path';
import { isPlainName, isTempName, type SyncPaths } from './hot-sync-paths.js';
import type { Tree } from './hot-sync-tree.js';

export interface LocalWatcherEvents {
  /** Something at `rel` (relative, POSIX) changed; temporary and unsyncable names are not reported. */
  onChange: (rel: string) => void;
  /** Something the user should know. */
  onNotice: (text: string) => void;
}

/** Watches the local folder, so that local changes are sent as they happen rather than at the next rescan. */
export class LocalWatcher {
  private readonly watchers = new Map<string, FSWatcher>();
  private closed = false;

  constructor(
    private readonly paths: SyncPaths,
    private readonly ignore: ReadonlySet<string>,
    private readonly events: LocalWatcherEvents,
  ) {}

  /** Starts watching; on Linux the watchers come with `refresh`, once the folder has been scanned. */
  start(): void {
    if (process.platform === 'linux') return;
    try {
      const watcher = watch(this.paths.localRoot, { recursive: true }, (_event, name) => {
        if (!name) return;
        const rel = name.split(path.sep).join('/');
        if (!rel.split('/').some((part) => this.ignore.has(part))) this.changed(rel);
      });
      watcher.on('error', () => watcher.close());
      this.watchers.set('', watcher);
    } catch {
      this.events.onNotice('local changes are found by rescanning only (the folder cannot be watched)');
    }
  }

  /**
   * Linux: a recursive watch would also watch every ignored directory (node_modules can be huge), so each
   * synced directory of `local` gets its own watcher instead. A failure (inotify limit) leaves the periodic
   * rescan.
   */
  refresh(local: Tree): void {
    if (process.platform !== 'linux' || this.closed) return;
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
        const watcher = watch(this.paths.localPath(rel), (_event, name) => {
          if (name) this.changed(rel === '' ? String(name) : `${rel}/${name}`);
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

  /** Closes every watcher for good. */
  close(): void {
    this.closed = true;
    for (const watcher of this.watchers.values()) watcher.close();
    this.watchers.clear();
  }

  private changed(rel: string): void {
    if (rel.split('/').some((part) => isTempName(part) || !isPlainName(part))) return;
    this.events.onChange(rel);
  }
}
