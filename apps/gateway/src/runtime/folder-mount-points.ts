import { readFileSync } from 'node:fs';
import path from 'node:path';

/** Where a workspace sees the folder mounts the gateway makes for it (read-only; sub-mounts propagate in). */
export const MOUNTS_IN_WORKSPACE = '/run/ccp-mounts';

/** One line of /proc/self/mountinfo that matters here. */
interface MountInfo {
  mountPoint: string;
  /** `shared:N`, `master:N`: how mounts under it propagate. */
  tags: string[];
  fsType: string;
}

/** mountinfo escapes space, tab, newline and backslash as octal. */
const unescapeOctal = (field: string) =>
  field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)));

export function readMountInfo(file = '/proc/self/mountinfo'): MountInfo[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [left = '', right = ''] = line.split(' - ');
      const fields = left.split(' ');
      return {
        mountPoint: unescapeOctal(fields[4] ?? ''),
        tags: fields.slice(6),
        fsType: right.split(' ')[0] ?? '',
      };
    });
}

const within = (child: string, parent: string) =>
  child === parent || child.startsWith(parent === '/' ? '/' : `${parent}/`);

/**
 * Mount points on this machine under `root` (deepest first, so they can be unmounted in that order).
 */
export function mountsUnder(root: string, mounts = readMountInfo()): string[] {
  return mounts
    .map((mount) => mount.mountPoint)
    .filter((point) => within(point, root) && point !== root)
    .sort((a, b) => b.length - a.length);
}

/** Whether something is mounted at `point` itself. */
export function isMountPoint(point: string, mounts = readMountInfo()): boolean {
  return mounts.some((mount) => mount.mountPoint === point);
}

/**
 * Whether mounts made under `dir` reach containers that bind it with `rslave`: the mount holding it must be
 * shared (systemd makes `/` shared; a machine without systemd needs `mount --make-rshared /`).
 */
export function propagatesToContainers(dir: string, mounts = readMountInfo()): boolean {
  const holder = mounts
    .filter((mount) => within(path.resolve(dir), mount.mountPoint))
    .sort((a, b) => b.mountPoint.length - a.mountPoint.length)[0];
  return holder?.tags.some((tag) => tag.startsWith('shared:')) ?? false;
}
