import path from 'node:path';
import { isPlainName } from './hot-sync-paths.js';
import type { Entry } from './hot-sync-tree.js';

/** Where the workspace sees the local `rel` through sshfs. */
export function coldTarget(coldRoot: string, rel: string): string {
  return path.posix.join(coldRoot, rel);
}

/** Whether `entry` is the link to `rel`'s own sshfs copy. */
export function isColdLink(coldRoot: string, rel: string, entry: Entry | undefined): boolean {
  return entry?.type === 'link' && entry.target === coldTarget(coldRoot, rel);
}

/** Whether the workspace shows this local entry through sshfs rather than as a copy. */
export function wantsColdLink(entry: Entry, maxFileBytes: number): boolean {
  return (entry.type === 'file' && entry.size >= maxFileBytes) || (entry.type === 'dir' && entry.ignored);
}

/**
 * The local path that a workspace link into the sshfs layer shows, when it is not this path's own link
 * (a big file renamed or moved in the workspace is such a link under its new name).
 */
export function coldSource(coldRoot: string, rel: string, r: Entry | undefined): string | null {
  if (r?.type !== 'link' || isColdLink(coldRoot, rel, r)) return null;
  const prefix = `${coldRoot}/`;
  if (!r.target.startsWith(prefix)) return null;
  const source = path.posix.normalize(r.target.slice(prefix.length));
  return source.split('/').every(isPlainName) ? source : null;
}
