import type { Duplex } from 'node:stream';
import type { EntryReady } from '@ccp/api';
import { Client, type ClientChannel } from 'ssh2';
import { AuthError, ConfigError, HostStoppedError, NetworkError } from './errors.js';
import type { KnownHosts } from './known-hosts.js';

export interface SshTarget {
  host: string;
  port: number;
  username: string;
  password: string;
}

export const targetOf = (entry: EntryReady): SshTarget => ({
  host: entry.ssh_host,
  port: entry.ssh_port,
  username: entry.ssh_user,
  password: entry.ssh_pass,
});

/** Keepalive timing: a link that answers nothing for interval × count is declared dead. */
export const KEEPALIVE = { intervalMs: 3000, countMax: 4 };

/** The gateway's SSH proxy refuses a host that is not running with a banner naming its state. */
const STOPPED_BANNER = /\bhost (\S+) is (stopped|stopping)\b/;
/** …and, when it knows, who stopped it: "(stopped by the administrator alice at 2026-…Z); start it…". */
const STOPPED_BY = /\(stopped by (.+?)\);/;

/** Opens an SSH connection to the gateway's proxy with the entry's credentials and a pinned host key. */
export function connectSsh(
  target: SshTarget,
  knownHosts: KnownHosts,
  timeoutMs = 20_000,
  socket?: () => Duplex,
): Promise<Client> {
  const endpoint = `${target.host}:${target.port}`;
  return new Promise((resolve, reject) => {
    const client = new Client();
    let mismatch: string | null = null;
    // The proxy says why it refuses a login in a banner before it ends the connection.
    let banner = '';
    client.on('banner', (text: string) => {
      banner += text;
    });
    client.once('ready', () => {
      client.removeAllListeners('error');
      // Later errors end the connection; its 'close' is what the session watches.
      client.on('error', () => {});
      resolve(client);
    });
    // `on`, not `once`: a failing handshake may report more than one error.
    let failed = false;
    client.on('error', (error: Error & { level?: string }) => {
      if (failed) return;
      failed = true;
      client.end();
      if (mismatch)
        reject(
          new ConfigError(
            `the SSH host key of ${endpoint} changed (pinned ${mismatch}); refusing to connect. If the gateway's key was really replaced, remove that line from ${knownHosts.file}`,
          ),
        );
      else if (STOPPED_BANNER.test(banner)) {
        const by = STOPPED_BY.exec(banner)?.[1];
        reject(
          new HostStoppedError(
            `host ${STOPPED_BANNER.exec(banner)?.[1]} was stopped ${by ? `by ${by}` : '(the gateway did not say by whom)'}; the session ended with it. ${banner.trim()}`,
          ),
        );
      } else if (error.level === 'client-authentication')
        reject(
          new AuthError(
            banner.trim() || `the SSH proxy refused the workspace credentials for ${target.username}`,
          ),
        );
      else reject(new NetworkError(`cannot connect to the SSH proxy at ${endpoint}: ${error.message}`));
    });
    client.connect({
      ...(socket ? { sock: socket() } : {}),
      host: target.host,
      port: target.port,
      username: target.username,
      password: target.password,
      readyTimeout: timeoutMs,
      keepaliveInterval: KEEPALIVE.intervalMs,
      keepaliveCountMax: KEEPALIVE.countMax,
      hostVerifier: (key: Buffer) => {
        const verdict = knownHosts.check(endpoint, key);
        if (verdict.result === 'mismatch') mismatch = verdict.pinned;
        return verdict.result !== 'mismatch';
      },
    });
    // Nagle held each small packet until the gateway acknowledged the last one, which it delays by 40 ms:
    // every keystroke, command and file request waited for it (ssh2 leaves Nagle on; OpenSSH turns it off).
    client.setNoDelay(true);
  });
}

/** Runs a non-interactive command and collects its output. */
export function execCollect(
  client: Client,
  command: string,
  input?: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    client.exec(command, (error, channel: ClientChannel) => {
      if (error) return reject(new NetworkError(`the workspace did not run a command: ${error.message}`));
      let stdout = '';
      let stderr = '';
      let code = 255;
      channel.on('data', (chunk: Buffer) => {
        stdout += chunk.toString('utf8');
      });
      channel.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString('utf8');
      });
      channel.on('exit', (status: number | null) => {
        code = status ?? 255;
      });
      channel.on('close', () => resolve({ code, stdout, stderr }));
      channel.end(input);
    });
  });
}

/** A word for a POSIX shell, quoted so that nothing in it is interpreted. */
export function shellQuote(word: string): string {
  return /^[A-Za-z0-9_./:=@%+,-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}
