import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  openSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';

/*
 * Paths the workspace names, seen the way the kernel resolves them on this machine. The workspace writes the
 * folder, links included, so a path is never normalised by hand before it is resolved: `d/up/../key` with
 * `d/up -> ..` is, for the kernel, `../key` seen from `d`'s parent, not `d/key`.
 */

export const isInside = (real: string, root: string) =>
  real === root || real.startsWith(`${root}${path.sep}`);

/** The path as the kernel will walk it from `cwd`, without removing `..` or following anything first. */
const asWalked = (name: string, cwd: string) => (path.isAbsolute(name) ? name : `${cwd}${path.sep}${name}`);

/**
 * Why `name` (an argument, an option's value) would lead git outside `root`, or undefined. Names of nothing are
 * fine (a revision, a message, a pattern); a name that exists must resolve inside the folder both as written
 * (git may normalise it) and as the kernel follows it.
 */
export function outsideFolder(name: string, cwd: string, root: string): string | undefined {
  if (name === '') return undefined;
  const walked = asWalked(name, cwd);
  try {
    lstatSync(walked);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ENAMETOOLONG') return undefined;
    return `${name} cannot be checked (${code})`;
  }
  if (!isInside(path.resolve(cwd, name), root)) return `${name} is outside the mounted folder`;
  let real: string;
  try {
    real = realpathSync.native(walked);
  } catch {
    return `${name} is a link that leads nowhere, which cannot be checked`;
  }
  return isInside(real, root) ? undefined : `${name} leads outside the mounted folder`;
}

/**
 * Reads a file the workspace names, as git would, but only if the file the kernel opened is inside `root`,
 * and writes it to `copy`: git then reads the copy, which the workspace cannot swap after this check.
 */
export function copyFromFolder(name: string, cwd: string, root: string, copy: string): string | undefined {
  const walked = asWalked(name, cwd);
  let fd: number;
  try {
    fd = openSync(walked, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    return `${name} cannot be read (${(error as NodeJS.ErrnoException).code})`;
  }
  try {
    const opened = fstatSync(fd);
    if (!opened.isFile()) return `${name} is not a file`;
    // Where the open file really is: Linux names it; elsewhere the resolved path must be that same file.
    let real: string;
    try {
      real = readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      real = realpathSync.native(walked);
      const seen = statSync(real);
      if (seen.ino !== opened.ino || seen.dev !== opened.dev) return `${name} changed while it was read`;
    }
    if (!isInside(real, root)) return `${name} leads outside the mounted folder`;
    if (opened.size > 16 * 1024 * 1024) return `${name} is larger than 16 MiB`;
    writeFileSync(copy, readFileSync(fd), { mode: 0o600 });
    return undefined;
  } finally {
    closeSync(fd);
  }
}
