import { isGitControlFile, isGitDirEntry, isInsideGitDir } from './git-control-files.js';
import { coldSource, isColdLink, wantsColdLink } from './hot-sync-cold-link.js';
import type { Base } from './hot-sync-history.js';
import { type Entry, signature } from './hot-sync-tree.js';
import { linkRefusal, refusedLinkText } from './link-targets.js';

/** What one path needs so that both sides show the same thing. */
export type Action =
  /** Nothing to do. */
  | { kind: 'none' }
  /** Gone from both sides: its history is dropped. */
  | { kind: 'forget' }
  /** Both sides already agree: the history records them as they are. */
  | { kind: 'record' }
  /** The workspace is made to show the local entry (or nothing); `notice` is said first. */
  | { kind: 'push'; notice?: string }
  /** This machine is made to show the workspace entry (or nothing); `notice` is said first. */
  | { kind: 'pull'; notice?: string }
  /** Deleted in the workspace while deletions are held back: the local entry is kept, and the path held. */
  | { kind: 'hold' }
  /** Both sides changed content: compared, and if different both versions are kept. */
  | { kind: 'conflict'; local: Entry; remote: Entry }
  /** Left as it is on both sides; `problem` is said once. */
  | { kind: 'leave'; problem: string };

/** What `decide` needs to know besides the three states of the path. */
export interface DecideContext {
  /** The path, relative to the root (POSIX). */
  rel: string;
  /** Where the workspace sees the local folder through sshfs. */
  coldRoot: string;
  /** Files of this size or more are links to the sshfs layer instead of copies. */
  maxFileBytes: number;
  /** Set by the mass-delete guard: deletions in the workspace are no longer applied locally. */
  deletionsHeld: boolean;
}

/**
 * What a path needs, from what is there locally (`l`), in the workspace (`r`), and what both sides agreed on
 * at the last sync (`base`). A side changed when its signature differs from the base, or there is no base.
 * Nothing the workspace made is copied here where git on this machine would run it (git-control-files.ts),
 * nor a link whose target is absolute or climbs out of the folder (link-targets.ts).
 */
export function decide(
  l: Entry | undefined,
  r: Entry | undefined,
  base: Base | undefined,
  context: DecideContext,
): Action {
  const action = decideSync(l, r, base, context);
  if ((action.kind === 'pull' || action.kind === 'conflict') && r && makesGitControl(context.rel, r))
    return {
      kind: 'leave',
      problem: `${context.rel} in the workspace is git's own to make on this machine (config, hooks, a .git that is not a folder); not copied`,
    };
  // A link is made here with its target as it is: programs on this machine would follow it out of the folder.
  if (action.kind === 'pull' && r?.type === 'link' && !coldSource(context.coldRoot, context.rel, r)) {
    const why = refusedLinkText(r.target, context.rel.split('/').length - 1);
    if (why)
      return { kind: 'leave', problem: `${context.rel} in the workspace: ${linkRefusal(why)}; not copied` };
  }
  return action;
}

/** Whether the workspace's entry at `rel`, copied here, would be a git control file or point git elsewhere. */
function makesGitControl(rel: string, entry: Entry): boolean {
  if (isGitControlFile(rel)) return true;
  if (isGitDirEntry(rel)) return entry.type !== 'dir';
  return isInsideGitDir(rel) && entry.type === 'link';
}

function decideSync(
  l: Entry | undefined,
  r: Entry | undefined,
  base: Base | undefined,
  context: DecideContext,
): Action {
  const { rel, coldRoot, maxFileBytes } = context;
  if (!l && !r) return { kind: 'forget' };
  // Ignored directories belong to this machine: the workspace gets a link, and its own are left alone.
  if (l?.type === 'dir' && l.ignored) {
    if (isColdLink(coldRoot, rel, r)) return { kind: 'record' };
    if (!r) return { kind: 'push' };
    return {
      kind: 'leave',
      problem: `${rel} in the workspace is not the link to the local folder; left as it is`,
    };
  }
  if (!l && r?.type === 'dir' && r.ignored) return { kind: 'none' };
  if (isColdLink(coldRoot, rel, r)) {
    // A link to this path's own sshfs copy shows the local entry: it holds nothing of its own.
    if (l && wantsColdLink(l, maxFileBytes)) return { kind: 'record' };
    return { kind: 'push' };
  }
  const localChanged = !base || signature(l) !== base.local;
  const remoteChanged = !base || signature(r) !== base.remote;
  if (!localChanged && !remoteChanged) return { kind: 'none' };
  if (base && localChanged && !remoteChanged) return { kind: 'push' };
  if (base && remoteChanged && !localChanged) {
    if (!r && context.deletionsHeld) return { kind: 'hold' };
    return { kind: 'pull' };
  }
  // Both sides changed since the last sync, or this path was never synced.
  if (!r) {
    if (!base) return { kind: 'push' };
    return {
      kind: 'push',
      notice: `${rel} was deleted in the workspace but changed locally; the local file is kept`,
    };
  }
  if (!l) {
    if (!base) return { kind: 'pull' };
    return {
      kind: 'pull',
      notice: `${rel} was deleted locally but changed in the workspace; it is restored locally`,
    };
  }
  if (l.type === 'dir' && r.type === 'dir') return { kind: 'record' };
  if (l.type === 'link' && r.type === 'link' && l.target === r.target) return { kind: 'record' };
  if (r.type === 'file' || coldSource(coldRoot, rel, r)) return { kind: 'conflict', local: l, remote: r };
  if (r.type === 'dir')
    return { kind: 'leave', problem: `${rel} is a folder in the workspace but not locally; left as it is` };
  return {
    kind: 'push',
    notice: `${rel}: the workspace's link (to ${r.target}) is replaced by the local version`,
  };
}
