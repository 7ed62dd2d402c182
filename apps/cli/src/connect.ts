import path from 'node:path';
import type { Config } from './config.js';
import { configDir } from './config.js';
import { entryAuth, WrongPasswordError } from './entry-auth.js';
import { ConfigError } from './errors.js';
import { KnownHosts } from './known-hosts.js';
import { type Link, openLink } from './session-runner.js';
import { type SshTarget, targetOf } from './ssh-connection.js';
import { readSecret, StatusLine } from './terminal.js';

export interface Connected {
  link: Link;
  target: SshTarget;
  knownHosts: KnownHosts;
}

/**
 * Entry auth (starting the host if needed, with a live status line), then the SSH connection through the
 * gateway's proxy. The password comes from the config file, CCP_PASSWORD, or the terminal, in that order;
 * only a typed one is asked again after a wrong-password answer.
 */
export async function connectWorkspace(config: Config, waitSeconds: number): Promise<Connected> {
  const saved = config.password ?? process.env.CCP_PASSWORD;
  const status = new StatusLine();
  let entry: Awaited<ReturnType<typeof entryAuth>> | undefined;
  for (let attempt = 1; !entry; attempt += 1) {
    const password = saved ?? (await readSecret(`Password for host ${config.short_id}: `));
    if (password === null || password === '')
      throw new ConfigError(
        'no password: run ccp in a terminal, set CCP_PASSWORD, or `ccp init --save-password`',
      );
    try {
      entry = await entryAuth({
        gateway: config.gateway,
        shortId: config.short_id,
        password,
        waitSeconds,
        onStarting: (answer) =>
          status.update(`host ${config.short_id} is starting: ${answer.stage} (${answer.progress}%)`),
      });
    } catch (error) {
      status.clear();
      if (error instanceof WrongPasswordError && saved === undefined && attempt < 3) {
        process.stderr.write('ccp: wrong password, try again\n');
        continue;
      }
      throw error;
    }
  }
  status.clear();
  const target = targetOf(entry);
  const knownHosts = new KnownHosts(path.join(configDir(), 'known_hosts'));
  const link = await openLink(target, knownHosts);
  return { link, target, knownHosts };
}
