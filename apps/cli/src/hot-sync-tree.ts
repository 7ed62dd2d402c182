/** What is at a path on one side. File times are milliseconds locally and whole seconds in the workspace. */
export type Entry =
  | { type: 'file'; size: number; mtime: number; mode: number }
  | { type: 'dir'; ignored: boolean; mode: number }
  | { type: 'link'; target: string };

/** One side's entries by path relative to the root. */
export type Tree = Map<string, Entry>;

/** The entry as the sync history records it: equal signatures mean nothing changed. */
export function signature(entry: Entry | undefined): string | null {
  if (!entry) return null;
  if (entry.type === 'file') return `f:${entry.size}:${entry.mtime}:${entry.mode.toString(8)}`;
  if (entry.type === 'dir') return entry.ignored ? 'i' : 'd';
  return `l:${entry.target}`;
}
