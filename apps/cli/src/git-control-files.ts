/**
 * Files in the user's folder that make git run programs on this machine when the user runs git there: a
 * repository's `config` (core.hooksPath, core.fsmonitor, filter and diff drivers, aliases, credential helpers;
 * also `config.worktree`, and `commondir`, which points git at another config) and its `hooks`, in `.git` and in
 * the git dirs of submodules under it; and a `.git` that is not a folder (a gitlink file or a link, pointing git
 * at a repository elsewhere). The workspace may be hostile, so what it writes into the folder never creates or
 * changes these, nor links within a `.git`; the user's own git on this machine makes them.
 *
 * Names are compared the way case-insensitive file systems (macOS, Windows) see them, since `.GIT/HOOKS` is
 * `.git/hooks` there.
 */

function comparable(name: string): string {
  // These zero-width characters are ignored by HFS+; trailing dots and spaces vanish on Windows.
  const visible = name.replace(/[\u200b-\u200f\u202a-\u202e\u206a-\u206f\ufeff]/g, '');
  const trimmed = visible.replace(/[. ]+$/, '');
  return (trimmed === '' ? visible : trimmed).toLowerCase();
}

/** Files of a git dir that name programs or point git at another config (`commondir`, used by worktrees). */
const CONTROL_FILES = new Set(['config', 'config.worktree', 'commondir']);

function components(relative: string): string[] {
  return relative
    .split(/[\\/]+/)
    .filter((part) => part !== '' && part !== '.')
    .map(comparable);
}

/** Whether `relative` (a path within the folder) is one of a git dir's control files or lies in its hooks. */
export function isGitControlFile(relative: string): boolean {
  const parts = components(relative);
  const gitDir = parts.indexOf('.git');
  if (gitDir === -1) return false;
  const within = parts.slice(gitDir + 1);
  return within.includes('hooks') || CONTROL_FILES.has(within.at(-1) ?? '');
}

/** Whether `relative` names a `.git` entry itself (which must only ever be made as a folder). */
export function isGitDirEntry(relative: string): boolean {
  return components(relative).at(-1) === '.git';
}

/** Whether `relative` lies inside a `.git` folder (somewhere below an entry named `.git`). */
export function isInsideGitDir(relative: string): boolean {
  return components(relative).slice(0, -1).includes('.git');
}
