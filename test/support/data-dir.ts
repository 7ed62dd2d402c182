import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';

/**
 * Removes a gateway's DATA_DIR made by a test or a bench. Homes of hosts it left running are ext4 images
 * loop-mounted under `runtime/homes/`, on mount points made immutable (runtime/home-volumes.ts): they are
 * unmounted and the flag lifted first, so that the directory can go and no loop device is left behind.
 */
export function removeDataDir(dir: string): void {
  const root = `${path.resolve(dir)}/`;
  for (const line of readFileSync('/proc/self/mounts', 'utf8').split('\n')) {
    const target = line.split(' ')[1];
    if (target?.startsWith(root)) execFileSync('umount', ['--lazy', target]);
  }
  const homes = path.join(dir, 'runtime', 'homes');
  if (existsSync(homes)) spawnSync('chattr', ['-R', '-i', homes]);
  rmSync(dir, { recursive: true, force: true });
}
