import { CONCURRENCY, pool } from './hot-sync-pool.js';
import type { Entry, Tree } from './hot-sync-tree.js';

/** A temporary file this old was left by an interrupted transfer. */
export const STALE_TEMP_MS = 15 * 60_000;

/** What a scan finds besides the entries, for the pass to act on. */
export interface ScanListener {
  /** `dir` could not be listed: it is not taken for empty. */
  cannotList(dir: string, error: Error): void;
  /** A name listed in `dir` is not a plain name, and was skipped. */
  refusedName(dir: string, name: string): void;
  /** A temporary file left by an interrupted transfer, old enough to be removed. */
  staleTemp(rel: string): void;
}

/** One side's entries, as its scanner reads them. */
export interface SideReader {
  /** What is at `rel` now (a link is not followed). */
  entry(rel: string): Promise<Entry | undefined>;
  /** The entries of the folder `dir`, leaving out what is not synced. */
  list(dir: string): Promise<Array<[string, Entry]>>;
}

/**
 * Adds everything under `start` (and `start` itself unless it is the root) to `tree`, breadth first, several
 * folders at a time; ignored folders are not entered.
 */
export async function walkTree(side: SideReader, start: string, tree: Tree): Promise<void> {
  if (start !== '') {
    const first = await side.entry(start);
    if (!first) return;
    tree.set(start, first);
    if (first.type !== 'dir' || first.ignored) return;
  }
  let level = [start];
  while (level.length > 0) {
    const next: string[] = [];
    await pool(level, CONCURRENCY, async (dir) => {
      for (const [rel, entry] of await side.list(dir)) {
        tree.set(rel, entry);
        if (entry.type === 'dir' && !entry.ignored) next.push(rel);
      }
    });
    level = next;
  }
}
