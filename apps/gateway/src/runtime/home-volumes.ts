import { execFile } from 'node:child_process';
import { mkdir, open, readFile, rm, rmdir, stat, statfs } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { RuntimeError } from './workspace-runtime.js';

const run = promisify(execFile);

/**
 * Homes with a size that holds: each host's home is an ext4 file system in a sparse image file of its own
 * (DATA_DIR/runtime/homes/<hostId>.img), loop-mounted at DATA_DIR/runtime/homes/<hostId>/ and handed to Docker
 * as a bind volume. Writing past the size fails with ENOSPC inside the workspace, and only there: the image
 * takes on this machine's disk no more than what was written into it. Docker's own volumes have no size on an
 * ext4 data root (the local driver's `size` needs XFS project quotas, and it cannot loop-mount), so the gateway
 * mounts the image itself, at every start (a reboot unmounts it). The empty mount point is made immutable, so
 * that a workspace Docker restarts before the gateway mounts its home writes nothing to the data disk.
 */
export class HomeVolumes {
  constructor(private readonly dir: string) {}

  image(hostId: string): string {
    return path.join(this.dir, `${hostId}.img`);
  }

  mountPoint(hostId: string): string {
    return path.join(this.dir, hostId);
  }

  /**
   * The home mounted at its mount point with at least `sizeMb`: made on first use, grown before it is mounted
   * (or online, where possible) when the size was raised. Never shrunk: a smaller size is refused before it gets
   * here.
   */
  async ensure(hostId: string, sizeMb: number, uid: number): Promise<string> {
    const image = this.image(hostId);
    const target = this.mountPoint(hostId);
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const made = !(await exists(image));
    if (made) {
      await sparseFile(image, sizeMb);
      // No reserved blocks: the size given is what the user can fill. The root belongs to the workspace's user.
      await tool('mkfs.ext4', ['-q', '-F', '-m', '0', '-E', `root_owner=${uid}:${uid}`, image]);
    }
    if (!(await isMountPoint(target))) {
      await this.grow(hostId, sizeMb);
      await mkdir(target, { recursive: true, mode: 0o755 });
      // Best effort: a data directory on a file system without the flag (tmpfs) goes without.
      await run('chattr', ['+i', target]).catch(() => undefined);
      await tool('mount', ['-o', 'loop,nodev,nosuid', image, target]);
    }
    if (made) {
      // The workspace fills an empty home from /etc/skel; ext4's lost+found would make it look used.
      await rmdir(path.join(target, 'lost+found')).catch(() => undefined);
    }
    await this.grow(hostId, sizeMb);
    return target;
  }

  /**
   * Grows the home to `sizeMb` when it is smaller: an unmounted one at once (e2fsck, resize2fs), a mounted one
   * online where the kernel lets this process (it needs CAP_SYS_RESOURCE); otherwise it stays as it is and grows
   * at the next start, which mounts it anew. Answers whether the home has the size now.
   */
  async grow(hostId: string, sizeMb: number): Promise<boolean> {
    const image = this.image(hostId);
    if (!(await exists(image))) return true;
    const before = (await stat(image)).size;
    if (before >= sizeMb * 1024 * 1024) return true;
    if (!(await isMountPoint(this.mountPoint(hostId)))) {
      await sparseFile(image, sizeMb);
      // e2fsck answers 1 when it fixed something, which resize2fs then accepts.
      await run('e2fsck', ['-f', '-p', image]).catch(() => undefined);
      await tool('resize2fs', [image]);
      return true;
    }
    const device = await loopDevice(image);
    if (!device) return false;
    await sparseFile(image, sizeMb);
    try {
      await tool('losetup', ['--set-capacity', device]);
      await tool('resize2fs', [device]);
      return true;
    } catch {
      // Back to the size the file system has, so the size read from the image stays true.
      await truncateTo(image, before);
      await run('losetup', ['--set-capacity', device]).catch(() => undefined);
      return false;
    }
  }

  /** Unmounts a stopped host's home (it is mounted again, and grown if asked, at its next start). */
  async unmount(hostId: string): Promise<void> {
    const target = this.mountPoint(hostId);
    if (await isMountPoint(target)) await tool('umount', [target]);
  }

  /** The size in MiB the home was made or last grown to; null when it has none (made before homes had one). */
  async sizeMb(hostId: string): Promise<number | null> {
    const image = this.image(hostId);
    return (await exists(image)) ? Math.floor((await stat(image)).size / 1024 / 1024) : null;
  }

  /** Bytes used and the file system's size, while mounted. */
  async usage(hostId: string): Promise<{ usedBytes: number; sizeBytes: number } | null> {
    const target = this.mountPoint(hostId);
    if (!(await isMountPoint(target))) return null;
    const fs = await statfs(target);
    return { usedBytes: (fs.blocks - fs.bfree) * fs.bsize, sizeBytes: fs.blocks * fs.bsize };
  }

  /** Unmounts and deletes the home: its files are gone. */
  async remove(hostId: string): Promise<void> {
    const target = this.mountPoint(hostId);
    if (await isMountPoint(target)) await tool('umount', ['--lazy', target]);
    if (await exists(target)) {
      await run('chattr', ['-i', target]).catch(() => undefined);
      await rmdir(target).catch(() => undefined);
    }
    await rm(this.image(hostId), { force: true });
  }
}

async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
}

async function sparseFile(file: string, sizeMb: number): Promise<void> {
  await truncateTo(file, sizeMb * 1024 * 1024);
}

async function truncateTo(file: string, bytes: number): Promise<void> {
  const handle = await open(file, 'a', 0o600);
  try {
    await handle.truncate(bytes);
  } finally {
    await handle.close();
  }
}

/** Whether something is mounted exactly there (/proc/self/mountinfo, whose paths escape spaces as \040). */
async function isMountPoint(target: string): Promise<boolean> {
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  const resolved = path.resolve(target);
  return info.split('\n').some((line) => line.split(' ')[4]?.replace(/\\040/g, ' ') === resolved);
}

/** The loop device an image is attached to, if any. */
async function loopDevice(image: string): Promise<string | null> {
  const { stdout } = await run('losetup', ['--noheadings', '--output', 'NAME', '--associated', image]);
  return stdout.trim().split('\n')[0] || null;
}

async function tool(command: string, args: string[]): Promise<void> {
  try {
    await run(command, args, { timeout: 60_000 });
  } catch (error) {
    const stderr = String((error as { stderr?: string }).stderr ?? '').trim();
    throw new RuntimeError(
      'home_volume_failed',
      `${command} ${args.at(-1)} failed: ${stderr || (error as Error).message}`,
    );
  }
}
