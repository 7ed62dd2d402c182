import * as fs from 'node:fs/promises';
import path from 'node:path';
import { isPlainName, isTempName, type SyncPaths } from './hot-sync-paths.js';
import { type ScanListener, type SideReader, STALE_TEMP_MS, walkTree } from './hot-sync-scan.js';
import type { Entry, Tree } from './hot-sync-tree.js';

/** Reads the local folder's entries. */
export class LocalScanner implements SideReader {
  constructor(
    private readonly paths: SyncPaths,
    private readonly ignore: ReadonlySet<string>,
    private readonly listener: ScanListener,
  ) {}

  /** What is at `rel` now (a link is not followed). */
  async entry(rel: string): Promise<Entry | undefined> {
    const stats = await fs.lstat(this.paths.localPath(rel)).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT' || error.code === 'ENOTDIR') return null;
      throw error;
    });
    if (!stats) return undefined;
    if (stats.isFile())
      return { type: 'file', size: stats.size, mtime: stats.mtimeMs, mode: stats.mode & 0o777 };
    if (stats.isDirectory())
      return { type: 'dir', ignored: this.ignore.has(path.posix.basename(rel)), mode: stats.mode & 0o777 };
    if (stats.isSymbolicLink()) return { type: 'link', target: await fs.readlink(this.paths.localPath(rel)) };
    return undefined;
  }

  /** Adds everything under `start` (and `start` itself unless it is the root) to `tree`. */
  scan(start: string, tree: Tree): Promise<void> {
    return walkTree(this, start, tree);
  }

  /** The entries of the folder `dir`, leaving out what is not synced. */
  async list(dir: string): Promise<Array<[string, Entry]>> {
    const names = await fs.readdir(this.paths.localPath(dir)).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') this.listener.cannotList(dir, error);
      return [] as string[];
    });
    const entries = await Promise.all(
      names.map(async (name): Promise<[string, Entry] | null> => {
        if (!isPlainName(name)) {
          this.listener.refusedName(dir, name);
          return null;
        }
        const rel = dir === '' ? name : `${dir}/${name}`;
        if (isTempName(name)) {
          const stats = await fs.lstat(this.paths.localPath(rel)).catch(() => null);
          if (stats && !stats.isDirectory() && stats.mtimeMs < Date.now() - STALE_TEMP_MS)
            this.listener.staleTemp(rel);
          return null;
        }
        const entry = await this.entry(rel).catch(() => undefined);
        return entry ? [rel, entry] : null;
      }),
    );
    return entries.filter((entry) => entry !== null);
  }
}
