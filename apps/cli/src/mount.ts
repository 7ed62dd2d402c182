import { createHash } from 'node:crypto';
import path from 'node:path';
import type { Client, ClientChannel, SFTPWrapper } from 'ssh2';
import { type Config, configDir, type MountMode } from './config.js';
import { ConfigError } from './errors.js';
import { HotSync } from './hot-sync.js';
import { FolderSftpServer } from './sftp-server.js';
import { expectOpenSshSftpServer } from './ssh2-internals.js';
import { yellow } from './terminal.js';

/** Served by the gateway itself (not the workspace): it runs sshfs on our SFTP and places the folder. */
export const FOLDER_MOUNT_SUBSYSTEM = 'ccp-mount@cloud-cli-proxy';

export interface MountOutcome {
  /** What the folder in the workspace is now. */
  mode: 'full' | 'sshfs-only' | 'none';
  reason: string;
}

/** A live mount: the channel carrying it (closing it ends the mount) and where it is in the workspace. */
export interface FolderMount {
  channel: ClientChannel;
  /** The mount's own path in the workspace (links of the `full` mode point into it). */
  source: string;
  /** Where the folder's path in the workspace leads: the mount, or the copy `full` fills. */
  dest: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Asks the gateway to mount `localRoot` (served from here over SFTP) in the workspace. `link`: the folder's
 * own path there leads to the mount; `directory`: to a directory we fill (the `full` mode), and the mount stays
 * at `source`. The gateway reports on the channel's stderr: `mounted <source> <dest>` or `error <why>`.
 */
export async function openFolderMount(
  client: Client,
  localRoot: string,
  layout: 'link' | 'directory',
  timeoutMs = 30_000,
): Promise<FolderMount> {
  const channel = await new Promise<ClientChannel>((resolve, reject) =>
    client.subsys(FOLDER_MOUNT_SUBSYSTEM, (error, opened) =>
      error
        ? reject(new Error('the gateway does not offer folder mounts (an older version?)'))
        : resolve(opened),
    ),
  );
  channel.write(`${JSON.stringify({ path: localRoot, layout })}\n`);
  return new Promise<FolderMount>((resolve, reject) => {
    let text = '';
    let settled = false;
    const settle = (error: Error | null, paths?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (error) {
        channel.close();
        reject(error);
      } else {
        const [source = '', dest = source] = paths!.split(' ');
        resolve({ channel, source, dest });
      }
    };
    const timer = setTimeout(
      () => settle(new Error(`the gateway did not mount the folder within ${timeoutMs / 1000} s`)),
      timeoutMs,
    );
    const sftp = new FolderSftpServer(localRoot).attach(client, channel, (chunk) => {
      text += chunk.toString('utf8');
      for (let end = text.indexOf('\n'); end >= 0; end = text.indexOf('\n')) {
        const line = text.slice(0, end);
        text = text.slice(end + 1);
        if (line.startsWith('mounted ')) settle(null, line.slice('mounted '.length));
        else if (line.startsWith('error ')) settle(new Error(line.slice('error '.length)));
      }
    });
    sftp.once('close', () => settle(new Error('the gateway ended the mount before it was ready')));
  });
}

/**
 * The folder in the workspace for one run of the CLI, set up again on every connection: `sshfs-only` is the
 * mount itself at the same path; `full` keeps a synced copy of small files there (HotSync, which lives across
 * reconnects) with links into the mount for the rest; `auto` tries `full`, then `sshfs-only`, and says why.
 * An explicitly asked mode that cannot be had is an error (exit 4).
 */
export class FolderMountKeeper {
  private hotSync: HotSync | null = null;
  private mount: FolderMount | null = null;
  /** After `auto` fell back once, reconnects go straight to the mode it got. */
  private settled: MountOutcome['mode'] | null = null;

  constructor(
    private readonly requested: MountMode,
    private readonly cwd: string,
    private readonly config: Config,
  ) {}

  async setUp(client: Client): Promise<MountOutcome> {
    this.hotSync?.detach();
    this.mount = null;
    const order: Array<'full' | 'sshfs-only'> =
      this.settled === 'full' || this.settled === 'sshfs-only'
        ? [this.settled]
        : this.requested === 'auto'
          ? ['full', 'sshfs-only']
          : [this.requested];
    const failures: string[] = [];
    for (const mode of order) {
      try {
        const outcome = await this.setUpMode(client, mode);
        this.settled = mode;
        const why = failures.length > 0 ? `${failures.join('; ')}; using ${mode}` : outcome;
        return { mode, reason: why };
      } catch (error) {
        failures.push(`${mode} is not available: ${(error as Error).message}`);
      }
    }
    if (this.requested !== 'auto') throw new ConfigError(`mount mode ${failures.join('; ')}`);
    return { mode: 'none', reason: failures.join('; ') };
  }

  /** A two-way pass of the full mode's copy now (nothing in the other modes, or while disconnected). */
  async flush(): Promise<void> {
    if (this.settled === 'full') await this.hotSync?.flush();
  }

  /** A last two-way pass of the full mode's copy, then its end (the CLI is leaving). */
  async close(): Promise<void> {
    await this.hotSync?.flush().catch(() => {});
    await this.hotSync?.stop();
    this.mount?.channel.close();
  }

  private async setUpMode(client: Client, mode: 'full' | 'sshfs-only'): Promise<string> {
    if (mode === 'sshfs-only') {
      this.mount = await openFolderMount(client, this.cwd, 'link');
      return 'as asked';
    }
    const mount = await openFolderMount(client, this.cwd, 'directory');
    try {
      const sftp = await openSftp(client);
      if (!this.hotSync) {
        this.hotSync = new HotSync({
          localRoot: this.cwd,
          remoteRoot: mount.dest,
          coldRoot: mount.source,
          maxFileBytes: this.config.hot_sync_max_file_mb * 1024 * 1024,
          ignore: this.config.hot_sync_ignore,
          historyFile: this.historyFile(),
          onConflict: (rel, keptAs) =>
            process.stderr.write(
              yellow(`ccp: ${rel} changed on both sides; kept yours, the workspace's copy is ${keptAs}\r\n`),
            ),
          onNotice: (text) => process.stderr.write(yellow(`ccp: ${text}\r\n`)),
        });
      }
      const summary = await this.hotSync.attach(sftp);
      this.mount = mount;
      return `${summary.filesCopied} files copied, ${summary.filesLinked} over ${this.config.hot_sync_max_file_mb} MB and ${summary.dirsLinked} folders served by sshfs`;
    } catch (error) {
      mount.channel.close();
      // Give the gateway a moment to take the mount down before another mode asks for the same path.
      await sleep(200);
      throw error;
    }
  }

  /** One history per gateway, host and local folder, kept with the configuration. */
  private historyFile(): string {
    const key = createHash('sha256')
      .update([this.config.gateway, this.config.short_id, this.cwd].join('\0'))
      .digest('hex')
      .slice(0, 32);
    return path.join(configDir(), 'hot-sync', `${key}.json`);
  }
}

function openSftp(client: Client): Promise<SFTPWrapper> {
  return new Promise((resolve, reject) =>
    client.sftp((error, sftp) => {
      if (error) return reject(error);
      expectOpenSshSftpServer(sftp);
      resolve(sftp);
    }),
  );
}
