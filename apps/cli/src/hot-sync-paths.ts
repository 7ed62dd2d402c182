import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import path from 'node:path';
import type { RemoteFs } from './remote-fs.js';

const TEMP_PREFIX = '.ccp-tmp-';

/**
 * Whether `name` can be one entry of a folder on every system. Names listed by the workspace come from its
 * SFTP server, which its root can replace: a separator (`/`, or `\` on Windows), NUL, `.` or `..` in one
 * would lead the copy on this machine elsewhere.
 */
export function isPlainName(name: string): boolean {
  return name !== '' && name !== '.' && name !== '..' && !/[/\\\0]/.test(name);
}

/** Whether `name` is one of the temporary names transfers write to (never synced). */
export function isTempName(name: string): boolean {
  return name.startsWith(TEMP_PREFIX);
}

/** A new temporary name in the folder of `rel` (both relative). */
export function tempName(rel: string): string {
  const dir = path.posix.dirname(rel);
  const name = `${TEMP_PREFIX}${randomBytes(6).toString('hex')}`;
  return dir === '.' ? name : `${dir}/${name}`;
}

/** Where a path relative to the synced folder (POSIX, `''` for the root) is on each side. */
export class SyncPaths {
  /** The roots with links resolved, known once attached (`resolveRoots`). */
  private realLocal = '';
  private realRemoteRoot = '';

  /** `localRoot` absolute on this machine, `remoteRoot` absolute (POSIX) in the workspace. */
  constructor(
    readonly localRoot: string,
    readonly remoteRoot: string,
  ) {}

  async resolveRoots(remote: RemoteFs): Promise<void> {
    this.realLocal = await fs.realpath(this.localRoot);
    this.realRemoteRoot = await remote.realpath(this.remoteRoot);
  }

  /** The local root with links resolved (once attached). */
  get realLocalRoot(): string {
    return this.realLocal;
  }

  /** The parts of `rel`; a part that is not a plain name is refused, whatever the path came from. */
  private partsOf(rel: string): string[] {
    const parts = rel.split('/');
    if (!parts.every(isPlainName)) throw new Error(`${JSON.stringify(rel)} is not a path inside the folder`);
    return parts;
  }

  /** Where `rel` is on this machine, to look at; anything that changes it goes through `checkedLocalPath`. */
  localPath(rel: string): string {
    return rel === '' ? this.localRoot : path.join(this.localRoot, ...this.partsOf(rel));
  }

  /**
   * Where to act on `rel` on this machine, resolved right before the act: its folder must be the same folder
   * under the real root, so that a link put in the local tree since the scan (the workspace can make links
   * here through sshfs) cannot lead a write, or a read sent to the workspace, outside the folder.
   */
  async checkedLocalPath(rel: string): Promise<string> {
    const parts = this.partsOf(rel);
    const folder = path.join(this.realLocal, ...parts.slice(0, -1));
    if ((await fs.realpath(folder)) !== folder)
      throw new Error(
        `${parts.slice(0, -1).join('/') || 'the folder'} leads outside the folder on this machine`,
      );
    return path.join(folder, parts.at(-1) as string);
  }

  remotePath(rel: string): string {
    return rel === '' ? this.remoteRoot : path.posix.join(this.remoteRoot, rel);
  }

  /** Where the workspace folder `rel` is once its links are resolved, when none leads out of the root. */
  realRemotePath(rel: string): string {
    return path.posix.join(this.realRemoteRoot, rel);
  }
}
