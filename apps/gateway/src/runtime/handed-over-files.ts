import { chmod, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

// Files and folders the gateway hands to a container, another user or another process get their mode by chmod,
// which the umask does not touch: `mode` at creation is cut by it (systemd's UMask=0077 made resolv.conf 0600,
// and the workspace's user could resolve no name).

/**
 * Makes `dir` and its missing parents traversable by everyone (the unprivileged sshfs user walks the path),
 * whatever the gateway's umask.
 */
export async function makeTraversableDir(dir: string): Promise<void> {
  const first = await mkdir(dir, { recursive: true });
  const top = first ?? dir;
  for (let level = dir; within(level, top); level = path.dirname(level)) await chmod(level, 0o755);
}

/** Writes `text` to `file` in place, readable by everyone (0644) whatever the umask. */
export async function writeReadableFile(file: string, text: string): Promise<void> {
  await writeFile(file, text);
  await chmod(file, 0o644);
}

const within = (child: string, parent: string) =>
  child === parent || child.startsWith(parent === '/' ? '/' : `${parent}/`);
