import { chmod, chown, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

// Files and folders the gateway hands to a container, another user or another process get their mode by chmod,
// which the umask does not touch: `mode` at creation is cut by it (systemd's UMask=0077 made resolv.conf 0600,
// and the workspace's user could resolve no name).

/**
 * Makes `dir` and its missing parents traversable by everyone, whatever the gateway's umask. (The folder
 * mount tree is closed again before anything is mounted in it: `closeMountTree`.)
 */
export async function makeTraversableDir(dir: string): Promise<void> {
  const first = await mkdir(dir, { recursive: true });
  const top = first ?? dir;
  for (let level = dir; within(level, top); level = path.dirname(level)) await chmod(level, 0o755);
}

/**
 * Closes the folder mount tree at `root` to everyone but root and the mount user (`gid` is its group): owner
 * root, 0710. The FUSE mounts below it are `allow_other`, for the workspace's user, who reaches its host's
 * folder through the container's bind mount and never walks `root`; another account of this machine would
 * otherwise read and write the users' folders there.
 */
export async function closeMountTree(root: string, gid: number): Promise<void> {
  await mkdir(root, { recursive: true });
  await chown(root, 0, gid);
  await chmod(root, 0o710);
}

/** Writes `text` to `file` in place, readable by everyone (0644) whatever the umask. */
export async function writeReadableFile(file: string, text: string): Promise<void> {
  await writeFile(file, text);
  await chmod(file, 0o644);
}

const within = (child: string, parent: string) =>
  child === parent || child.startsWith(parent === '/' ? '/' : `${parent}/`);
