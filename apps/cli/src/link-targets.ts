import * as fs from 'node:fs/promises';
import path from 'node:path';

/**
 * Which links the workspace may make in the user's folder on this machine (through the mount, or copied by
 * hot sync). The user's own programs (editor, build tools, git) follow a link with the kernel's rules, which
 * no check made when the link is created can foresee: `..` is taken from wherever the links before it led, and
 * those links can be changed later (`d/up -> ..` makes `d/up/../x` leave the folder). So only a relative
 * target that goes down from the link's own folder is allowed: no `..` component, not absolute. Such a link
 * leads out only through a link the user made; the kernel's view of the target is checked for that too.
 */

/** Why `target` is not a link the workspace may make, or null when its text goes down from the link's folder. */
export function refusedLinkText(target: string): string | null {
  const shown = JSON.stringify(target);
  if (target === '' || target.includes('\0')) return `its target ${shown} is not a path`;
  if (path.posix.isAbsolute(target) || path.win32.isAbsolute(target))
    return `its target ${shown} is absolute`;
  // `\` is a separator on Windows: a `..` between backslashes climbs there.
  if (target.split(/[\\/]+/).includes('..')) return `its target ${shown} climbs with ".."`;
  return null;
}

/** Whether `real` is `realRoot` or lies below it (both absolute, links resolved). */
export function isWithin(realRoot: string, real: string): boolean {
  return (
    real === realRoot || real.startsWith(realRoot.endsWith(path.sep) ? realRoot : `${realRoot}${path.sep}`)
  );
}

/**
 * Why a link at `realDir` (a folder under `realRoot`, both with links resolved) to `target` is refused, or
 * null. Besides the text, where the kernel resolves the target now (as far as it exists) must be inside the
 * folder.
 */
export async function refusedLink(realRoot: string, realDir: string, target: string): Promise<string | null> {
  const text = refusedLinkText(target);
  if (text) return text;
  let at = path.join(realDir, ...target.split('/').filter((part) => part !== '' && part !== '.'));
  while (isWithin(realDir, at)) {
    const real = await fs.realpath(at).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT' || error.code === 'ENOTDIR') return null;
      throw error;
    });
    if (real !== null)
      return isWithin(realRoot, real)
        ? null
        : `its target ${JSON.stringify(target)} leads outside the folder (to ${real})`;
    if (at === realDir) break;
    at = path.dirname(at);
  }
  return null;
}

/** The message for a link refused for `why` (from `refusedLink`). */
export function linkRefusal(why: string): string {
  return `a link made from the workspace must lead down within the folder: ${why}`;
}
