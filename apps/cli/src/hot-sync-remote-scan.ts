import path from 'node:path';
import type { Stats } from 'ssh2';
import { Detached } from './hot-sync-errors.js';
import { isPlainName, isTempName, type SyncPaths } from './hot-sync-paths.js';
import { type ScanListener, type SideReader, STALE_TEMP_MS, walkTree } from './hot-sync-scan.js';
import type { Entry, Tree } from './hot-sync-tree.js';
import { isMissing, type RemoteFs } from './remote-fs.js';

/** Reads the workspace folder's entries over one SFTP session, one directory listing per request. */
export class RemoteScanner implements SideReader {
  /** `attached` tells whether `remote` is still the session in use (a failed listing may mean it is not). */
  constructor(
    private readonly remote: RemoteFs,
    private readonly paths: SyncPaths,
    private readonly ignore: ReadonlySet<string>,
    private readonly listener: ScanListener,
    private readonly attached: () => boolean,
  ) {}

  private entryOf(rel: string, attrs: Stats, target?: string): Entry | undefined {
    if (attrs.isFile())
      return { type: 'file', size: attrs.size, mtime: attrs.mtime, mode: attrs.mode & 0o777 };
    if (attrs.isDirectory())
      return { type: 'dir', ignored: this.ignore.has(path.posix.basename(rel)), mode: attrs.mode & 0o777 };
    if (attrs.isSymbolicLink() && target !== undefined) return { type: 'link', target };
    return undefined;
  }

  /** What is at `rel` now (a link is not followed). */
  async entry(rel: string): Promise<Entry | undefined> {
    const attrs = await this.remote.lstat(this.paths.remotePath(rel));
    if (!attrs) return undefined;
    const target = attrs.isSymbolicLink()
      ? await this.remote.readlink(this.paths.remotePath(rel))
      : undefined;
    return this.entryOf(rel, attrs, target);
  }

  /** Adds everything under `start` (and `start` itself unless it is the root) to `tree`. */
  scan(start: string, tree: Tree): Promise<void> {
    return walkTree(this, start, tree);
  }

  /** The entries of the folder `dir`, leaving out what is not synced; one listing request. */
  async list(dir: string): Promise<Array<[string, Entry]>> {
    let listing: Awaited<ReturnType<RemoteFs['readdir']>>;
    try {
      listing = await this.remote.readdir(this.paths.remotePath(dir));
    } catch (error) {
      if (!this.attached()) throw new Detached();
      if (!isMissing(error)) this.listener.cannotList(dir, error as Error);
      return [];
    }
    const entries = await Promise.all(
      listing
        .filter(({ name }) => {
          if (name === '.' || name === '..') return false;
          if (isPlainName(name)) return true;
          this.listener.refusedName(dir, name);
          return false;
        })
        .map(async ({ name, attrs }): Promise<[string, Entry] | null> => {
          const rel = dir === '' ? name : `${dir}/${name}`;
          if (isTempName(name)) {
            if (!attrs.isDirectory() && attrs.mtime * 1000 < Date.now() - STALE_TEMP_MS)
              this.listener.staleTemp(rel);
            return null;
          }
          const target = attrs.isSymbolicLink()
            ? await this.remote.readlink(this.paths.remotePath(rel)).catch(() => undefined)
            : undefined;
          const entry = this.entryOf(rel, attrs, target);
          return entry ? [rel, entry] : null;
        }),
    );
    return entries.filter((entry) => entry !== null);
  }
}
