import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { PtySession } from '../../../gateway/test/helpers/pty-session.js';

const exec = promisify(execFile);
export const CLI_DIR = fileURLToPath(new URL('../..', import.meta.url));
/** The bundle users download (`npm run bundle` in apps/cli). */
export const BUNDLE = path.join(CLI_DIR, 'dist', 'ccp.mjs');

export interface CcpDriverOptions {
  /** Holds the clients' config folders; it is also their HOME. */
  work: string;
  /** The local project folder ccp runs from. */
  project: string;
  /** What every client's config file says unless its own config says otherwise (read when a client is made). */
  config: () => Record<string, unknown>;
  /** The password ccp finds in CCP_PASSWORD. */
  password: () => string;
}

/**
 * Runs the real ccp as a user would, each "client machine" with its own config folder: in a terminal
 * (`ccp`, waiting for text fails as soon as ccp has ended) or without one (`run`). `kill()` ends every terminal.
 */
export function ccpDriver(options: CcpDriverOptions) {
  const sessions: PtySession[] = [];
  const env = (configHome: string, extra: Record<string, string> = {}) => ({
    PATH: process.env.PATH,
    HOME: options.work,
    LANG: 'C.UTF-8',
    XDG_CONFIG_HOME: configHome,
    CCP_PASSWORD: options.password(),
    ...extra,
  });
  return {
    env,
    configFile: (configHome: string) => path.join(configHome, 'ccp', 'config.yaml'),
    /** A client machine: its own config folder, with a config file unless `config` is null. */
    client(name: string, config: Record<string, unknown> | null = {}): string {
      const dir = path.join(options.work, `client-${name}`);
      mkdirSync(path.join(dir, 'ccp'), { recursive: true });
      if (config) {
        const lines = Object.entries({ ...options.config(), ...config }).map(
          ([key, value]) => `${key}: ${JSON.stringify(value)}`,
        );
        writeFileSync(path.join(dir, 'ccp', 'config.yaml'), `${lines.join('\n')}\n`, { mode: 0o600 });
      }
      return dir;
    },
    /** `ccp <args>` in a terminal, from the project folder. */
    ccp(configHome: string, args: string, extra: Record<string, string> = {}): PtySession {
      const session = new PtySession(
        `cd '${options.project}' && exec node '${BUNDLE}' ${args}`,
        env(configHome, extra),
      );
      sessions.push(session);
      const waitFor = session.waitFor.bind(session);
      session.waitFor = (pattern, ms) =>
        Promise.race([
          waitFor(pattern, ms),
          session.exited.then(async (code) => {
            // What it printed last may still be what was awaited.
            await waitFor(pattern, 200).catch(() => {
              throw new Error(`ccp ended (${code}) before ${String(pattern)} appeared:\n${session.screen}`);
            });
          }),
        ]);
      return session;
    },
    /** `ccp <args>` without a terminal: its status and output. */
    async run(configHome: string, args: string[], extra: Record<string, string> = {}) {
      const result = await exec('node', [BUNDLE, ...args], {
        cwd: options.project,
        env: env(configHome, extra),
      }).catch((error) => error);
      return {
        code: (result.code as number | undefined) ?? 0,
        stdout: result.stdout as string,
        stderr: result.stderr as string,
      };
    },
    kill(): void {
      for (const session of sessions) session.kill();
    },
  };
}
