import * as fs from 'node:fs/promises';
import path from 'node:path';

/**
 * Which links the workspace may make in the user's folder on this machine (through the mount, or copied by
 * hot sync). The user's own programs (editor, build tools, git) follow a link with the kernel's rules, which
 * no check made when the link is created can foresee: a `..` after a name is taken from wherever the links
 * before it led, and those links can be changed later (`d/up -> ..` makes `d/up/../x` leave the folder). So a
 * target must be relative, and its `..` all leading (`../../a/b`, npm's and pnpm's node_modules links): the
 * kernel takes those from the folder the link is in, so no link can redirect them, and there must be no more
 * of them than that folder is deep. The rest goes down; it leads out only through a link the user made, which
 * the kernel's view of the target is checked for. A folder holding climbing links moved up would make them
 * climb out: renames are checked with `refusedMove`.
 */

/** The shape allowed, for refusal messages. */
const ALLOWED =
  'a link made from the workspace must stay within the folder (a relative target that goes down, or starts with no more "../" than its folder is deep, as npm\'s node_modules/.bin links do)';

/** How many folders `realDir` (links resolved) is below `realRoot`. */
export function depthBelow(realRoot: string, realDir: string): number {
  const relative = path.relative(realRoot, realDir);
  return relative === '' ? 0 : relative.split(path.sep).length;
}

/**
 * How many leading `..` the relative `target` has, or why its shape is refused: absolute, empty, or a `..`
 * (or, after a leading `..`, a `.`) coming after a name.
 */
function leadingClimbs(target: string): number | string {
  const shown = JSON.stringify(target);
  if (target === '' || target.includes('\0')) return `its target ${shown} is not a path`;
  if (path.posix.isAbsolute(target) || path.win32.isAbsolute(target))
    return `its target ${shown} is absolute`;
  // `\` is a separator on Windows: a `..` between backslashes climbs there.
  const parts = target.split(/[\\/]+/).filter((part) => part !== '');
  let climbs = 0;
  while (parts[climbs] === '..') climbs++;
  const rest = parts.slice(climbs);
  if (rest.includes('..')) return `its target ${shown} has ".." after a name`;
  if (climbs > 0 && rest.includes('.')) return `its target ${shown} has "." after ".."`;
  return climbs;
}

/**
 * Why `target` is not a link the workspace may make in a folder `depth` levels below the root (0 for the root
 * itself), or null when its text stays within the folder.
 */
export function refusedLinkText(target: string, depth: number): string | null {
  const climbs = leadingClimbs(target);
  if (typeof climbs === 'string') return climbs;
  if (climbs > depth)
    return `its target ${JSON.stringify(target)} climbs ${climbs} folder${climbs === 1 ? '' : 's'} from one ${depth} deep`;
  return null;
}

/** Whether `real` is `realRoot` or lies below it (both absolute, links resolved). */
export function isWithin(realRoot: string, real: string): boolean {
  return (
    real === realRoot || real.startsWith(realRoot.endsWith(path.sep) ? realRoot : `${realRoot}${path.sep}`)
  );
}

/**
 * Why a link at `realDir` (a folder under `realRoot`, both with links resolved; it need not exist yet when
 * the link is about to be moved there) to `target` is refused, or null. Besides the text, where the kernel
 * resolves the target now (as far as it exists) must be inside the folder.
 */
export async function refusedLink(realRoot: string, realDir: string, target: string): Promise<string | null> {
  const text = refusedLinkText(target, depthBelow(realRoot, realDir));
  if (text) return text;
  // The leading `..` are taken from the link's own folder; what follows goes down from there.
  const parts = target.split(/[\\/]+/).filter((part) => part !== '' && part !== '.');
  const from = path.join(realDir, ...parts.filter((part) => part === '..'));
  let at = path.join(realDir, ...parts);
  while (isWithin(from, at)) {
    const real = await fs.realpath(at).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT' || error.code === 'ENOTDIR') return null;
      throw error;
    });
    if (real !== null)
      return isWithin(realRoot, real)
        ? null
        : `its target ${JSON.stringify(target)} leads outside the folder (to ${real})`;
    if (at === from) break;
    at = path.dirname(at);
  }
  return null;
}

/** Entries a moved folder may hold for its links to be checked; past it the move is refused. */
export const MOVE_CHECK_LIMIT = 200_000;

/**
 * Why moving `realSource` (an entry under `realRoot`) to `realTarget` (its new path, its folder's links
 * resolved) is refused, or null. A moved link is checked as if made at its new place (unless it stays in its
 * folder, or its target is absolute and so means the same anywhere). A folder moved up is walked (no link
 * followed): a link in it whose leading `..` reach out of the moved folder is checked at its new place too.
 */
export async function refusedMove(
  realRoot: string,
  realSource: string,
  realTarget: string,
): Promise<string | null> {
  const moved = await fs.lstat(realSource);
  const shown = path.relative(realRoot, realSource);
  if (moved.isSymbolicLink()) {
    const target = await fs.readlink(realSource);
    if (path.dirname(realSource) === path.dirname(realTarget) || path.isAbsolute(target)) return null;
    const why = await refusedLink(realRoot, path.dirname(realTarget), target);
    return why && `${ALLOWED}; moving ${shown} there: ${why}`;
  }
  const shallower = depthBelow(realRoot, realTarget) < depthBelow(realRoot, realSource);
  if (!moved.isDirectory() || !shallower) return null;
  let seen = 0;
  const walk = async (relDir: string): Promise<string | null> => {
    const names = await fs.readdir(path.join(realSource, relDir));
    seen += names.length;
    if (seen > MOVE_CHECK_LIMIT)
      return `${shown} holds more than ${MOVE_CHECK_LIMIT} entries, too many to check its links before moving it to a folder higher up; move it within its folder, or from this machine`;
    for (const name of names) {
      const rel = path.join(relDir, name);
      const stats = await fs.lstat(path.join(realSource, rel));
      if (stats.isDirectory()) {
        const why = await walk(rel);
        if (why) return why;
      } else if (stats.isSymbolicLink()) {
        const target = await fs.readlink(path.join(realSource, rel));
        if (path.isAbsolute(target)) continue;
        const climbs = leadingClimbs(target);
        // A link whose leading `..` stay inside the moved folder means the same thing after the move.
        if (typeof climbs === 'number' && climbs <= (relDir === '' ? 0 : relDir.split(path.sep).length))
          continue;
        const why = await refusedLink(realRoot, path.join(realTarget, relDir), target);
        if (why) return `${ALLOWED}; moving ${shown} there would make ${path.join(shown, rel)} wrong: ${why}`;
      }
    }
    return null;
  };
  return walk('');
}

/** The message for a link refused for `why` (from `refusedLink`). */
export function linkRefusal(why: string): string {
  return `${ALLOWED}: ${why}`;
}
