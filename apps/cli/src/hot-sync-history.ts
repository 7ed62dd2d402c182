import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import path from 'node:path';

/** The state both sides agreed on after the last sync of a path, as each side's signature. */
export interface Base {
  local: string;
  remote: string;
}

/** What a history file holds; `id` is also written into the workspace copy it belongs to. */
interface StoredHistory {
  format: 1;
  id: string;
  localRoot: string;
  remoteRoot: string;
  /** [path, local signature, workspace signature] */
  paths: Array<[string, string, string]>;
}

/**
 * The last agreed state of every synced path. `changes` counts updates, so a save can be skipped when
 * nothing changed since the last one.
 */
export class SyncHistory {
  private readonly paths = new Map<string, Base>();
  /** Paths whose deletion in the workspace was held back: kept here, left out of what is saved, so that the
   * next run finds them on this side only and copies them to the workspace again. */
  private readonly held = new Set<string>();
  changes = 0;

  get(rel: string): Base | undefined {
    return this.paths.get(rel);
  }

  set(rel: string, base: Base): void {
    const was = this.paths.get(rel);
    if (was?.local === base.local && was.remote === base.remote) return;
    this.paths.set(rel, base);
    this.changes++;
  }

  delete(rel: string): void {
    if (this.paths.delete(rel)) this.changes++;
  }

  hold(rel: string): void {
    if (this.held.has(rel)) return;
    this.held.add(rel);
    this.changes++;
  }

  keys(): IterableIterator<string> {
    return this.paths.keys();
  }

  /** What a saved history holds: every path but the held ones. */
  toSave(): Array<[string, Base]> {
    return [...this.paths].filter(([rel]) => !this.held.has(rel));
  }

  replaceWith(entries: Iterable<[string, Base]>): void {
    this.paths.clear();
    for (const [rel, base] of entries) this.paths.set(rel, base);
    this.changes++;
  }
}

export const newHistoryId = () => randomBytes(12).toString('hex');

const isText = (value: unknown): value is string => typeof value === 'string';

/**
 * The history kept in `file` for these two roots, or null when there is none, it is unreadable, or it belongs
 * to other roots. Never throws: without a history every path is compared by content, which is safe.
 */
export async function readHistoryFile(
  file: string,
  localRoot: string,
  remoteRoot: string,
): Promise<{ id: string; paths: Array<[string, Base]> } | null> {
  let stored: Partial<StoredHistory>;
  try {
    stored = JSON.parse(await fs.readFile(file, 'utf8')) as Partial<StoredHistory>;
  } catch {
    return null;
  }
  if (
    stored.format !== 1 ||
    !isText(stored.id) ||
    stored.localRoot !== localRoot ||
    stored.remoteRoot !== remoteRoot ||
    !Array.isArray(stored.paths)
  )
    return null;
  const paths: Array<[string, Base]> = [];
  for (const row of stored.paths) {
    if (!Array.isArray(row) || !row.every(isText) || row.length !== 3) return null;
    paths.push([row[0], { local: row[1], remote: row[2] }]);
  }
  return { id: stored.id, paths };
}

/** Writes the history atomically (a temporary file renamed into place), readable by its owner only. */
export async function writeHistoryFile(
  file: string,
  history: { id: string; localRoot: string; remoteRoot: string; paths: Iterable<[string, Base]> },
): Promise<void> {
  const stored: StoredHistory = {
    format: 1,
    id: history.id,
    localRoot: history.localRoot,
    remoteRoot: history.remoteRoot,
    paths: [...history.paths].map(([rel, base]) => [rel, base.local, base.remote]),
  };
  await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const temp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await fs.writeFile(temp, JSON.stringify(stored), { mode: 0o600, flag: 'wx' });
    await fs.rename(temp, file);
  } catch (error) {
    await fs.unlink(temp).catch(() => {});
    throw error;
  }
}
