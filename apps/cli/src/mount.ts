import type { Client, ClientChannel } from 'ssh2';
import type { MountMode } from './config.js';
import { ConfigError } from './errors.js';
import { FolderSftpServer } from './sftp-server.js';
import { execCollect, shellQuote } from './ssh-connection.js';

export interface MountOutcome {
  /** What the folder in the workspace is: a live mount, or only an empty folder at the same path. */
  mode: 'sshfs-only' | 'none';
  reason: string;
}

/** `full` (a synced local copy for small files) is not offered by this version; `auto` says so and uses sshfs. */
export const FULL_UNAVAILABLE = 'full (a synced copy of small files) is not available in this ccp version';

/** What the workspace lacks for reverse sshfs: the sshfs program and a /dev/fuse the user may open. */
async function workspaceLacks(client: Client): Promise<string[]> {
  const probe = await execCollect(
    client,
    'command -v sshfs >/dev/null 2>&1 || echo "sshfs is not installed"; [ -r /dev/fuse ] && [ -w /dev/fuse ] || echo "/dev/fuse is not available"',
  );
  return probe.stdout.split('\n').filter(Boolean);
}

/**
 * Reverse sshfs: `sshfs -o passive` in the workspace speaks SFTP on its stdin and stdout, which is an exec
 * channel whose other end is our SFTP server on the local folder. Resolves once the mount is visible, with
 * the channel (closing it ends the mount).
 */
export async function mountFolder(
  client: Client,
  localRoot: string,
  remotePath: string,
): Promise<ClientChannel> {
  const where = shellQuote(remotePath);
  // A mount left by a dead connection answers "Transport endpoint is not connected" until it is removed.
  await execCollect(
    client,
    `fusermount3 -u -z ${where} 2>/dev/null || fusermount -u -z ${where} 2>/dev/null; true`,
  );
  const command = `exec sshfs -f -o passive,dir_cache=no,uid="$(id -u)",gid="$(id -g)" ${shellQuote(`:${localRoot}`)} ${where}`;
  const channel = await new Promise<ClientChannel>((resolve, reject) =>
    client.exec(command, (error, opened) => (error ? reject(error) : resolve(opened))),
  );
  let stderr = '';
  channel.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  const ended = new Promise<never>((_, reject) =>
    channel.once('close', () => reject(new Error(`sshfs ended: ${stderr.trim() || 'no message'}`))),
  );
  new FolderSftpServer(localRoot).attach(client, channel);
  // The mount is up when the folder's device differs from its parent's.
  const check = `for i in $(seq 1 100); do mountpoint -q ${where} 2>/dev/null || [ "$(stat -c %d ${where})" != "$(stat -c %d ${where}/..)" ] && exit 0; sleep 0.1; done; exit 1`;
  const mounted = await Promise.race([execCollect(client, check), ended]);
  if (mounted.code !== 0) {
    channel.close();
    throw new Error(`sshfs did not mount ${remotePath}: ${stderr.trim() || 'timed out'}`);
  }
  return channel;
}

/**
 * Prepares the folder at the same absolute path in the workspace and mounts the local folder there, in the
 * best mode available. An explicitly asked mode that cannot be had is an error (exit 4); `auto` falls back
 * and says why.
 */
export async function prepareMount(
  client: Client,
  requested: Exclude<MountMode, 'full'>,
  cwd: string,
): Promise<{ outcome: MountOutcome; channel: ClientChannel | null }> {
  const dir = shellQuote(cwd);
  const made = await execCollect(
    client,
    `mkdir -p ${dir} 2>/dev/null || sudo -n install -d -o "$(id -u)" -g "$(id -g)" ${dir}`,
  );
  const fallback = requested === 'auto' ? `${FULL_UNAVAILABLE}; ` : '';
  const none = (why: string) => {
    if (requested === 'sshfs-only') throw new ConfigError(`mount mode sshfs-only is not available: ${why}`);
    return {
      outcome: { mode: 'none' as const, reason: `${fallback}sshfs-only is not available: ${why}` },
      channel: null,
    };
  };
  if (made.code !== 0) return none(`the workspace cannot create ${cwd}: ${made.stderr.trim()}`);
  const lacks = await workspaceLacks(client);
  if (lacks.length > 0) return none(`in the workspace ${lacks.join(' and ')}`);
  try {
    const channel = await mountFolder(client, cwd, cwd);
    return {
      outcome: { mode: 'sshfs-only', reason: fallback ? `${fallback}using sshfs-only` : 'as asked' },
      channel,
    };
  } catch (error) {
    return none((error as Error).message);
  }
}
