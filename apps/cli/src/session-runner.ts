import { type Socket, connect as tcpConnect } from 'node:net';
import type { Client, ClientChannel } from 'ssh2';
import { CommandProxy } from './command-proxy.js';
import type { Config, MountMode } from './config.js';
import { CliError, NetworkError, SessionCommandError } from './errors.js';
import { InputBuffer } from './input-buffer.js';
import type { KnownHosts } from './known-hosts.js';
import { FolderMountKeeper, type MountOutcome } from './mount.js';
import { connectSsh, execCollect, type SshTarget } from './ssh-connection.js';
import { restoreTerminal, StatusLine, yellow } from './terminal.js';
import { type AttachPlan, attachScript, sessionEndedMessage, takeStatusScript } from './tmux.js';

/** An outage longer than this ends the CLI with exit 2; shorter ones are ridden out. */
export const RECONNECT_WINDOW_MS = 30_000;

export interface RunOptions {
  target: SshTarget;
  knownHosts: KnownHosts;
  config: Config;
  mountMode: MountMode;
  plan: AttachPlan;
  cwd: string;
  /** The connection already opened. */
  first: Link;
}

/**
 * Where typed keys go: the live session, or the buffer while there is none. Keys sent after the server was
 * last heard from (a shell echoes what it receives) may have died with the link; they are sent again.
 */
interface Input {
  buffer: InputBuffer;
  sink: ((chunk: Buffer) => void) | null;
  unconfirmed: Array<{ at: number; data: Buffer }>;
}

/** A live connection and the moment its last bytes arrived (for how long an outage has lasted). */
export interface Link {
  client: Client;
  lastHeard: () => number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Connects with our own socket so that we can tell when the server was last heard from. */
export async function openLink(target: SshTarget, knownHosts: KnownHosts, timeoutMs?: number): Promise<Link> {
  let heard = Date.now();
  const client = await connectSsh(target, knownHosts, timeoutMs, () => {
    const socket: Socket = tcpConnect({ host: target.host, port: target.port });
    socket.on('data', () => {
      heard = Date.now();
    });
    return socket;
  });
  return { client, lastHeard: () => heard };
}

/**
 * Sets up one connection (mount, command proxy) and runs the attach on it. Resolves with the remote exit
 * status, or with null when the link died first.
 */
async function runOnce(
  link: Link,
  options: RunOptions,
  proxy: CommandProxy,
  input: Input,
  mounts: FolderMountKeeper,
  reportMount: (outcome: MountOutcome) => void,
): Promise<number | null> {
  const { client } = link;
  const closed = new Promise<null>((resolve) => client.once('close', () => resolve(null)));
  const setup = (async () => {
    reportMount(await mounts.setUp(client));
    const port = proxy.enabled ? await proxy.listen(client).catch(() => null) : null;
    if (proxy.enabled && port === null)
      process.stderr.write(
        yellow('ccp: the workspace refused the command proxy forward; proxy_commands are off\n'),
      );
    await execCollect(client, proxy.installScript(port));
  })();
  const ready = await Promise.race([setup.then(() => true), closed]).catch((error) => {
    throw error instanceof CliError ? error : new NetworkError(String((error as Error).message));
  });
  if (ready === null) return null;

  const stdin = process.stdin;
  const stdout = process.stdout;
  const channel = await new Promise<ClientChannel | null>((resolve) => {
    client.exec(
      attachScript(options.plan),
      {
        pty: {
          term: process.env.TERM || 'xterm-256color',
          rows: stdout.rows || 24,
          cols: stdout.columns || 80,
        },
      },
      (error, opened) => resolve(error ? null : opened),
    );
    void closed.then(() => resolve(null));
  });
  if (!channel) return null;

  // What was typed before the session was ready goes first.
  const { data, dropped } = input.buffer.take();
  if (dropped)
    process.stderr.write(yellow('ccp: some input typed during the outage was too much to keep\r\n'));
  if (data.length > 0) channel.write(data);
  input.sink = (chunk: Buffer) => {
    const heard = link.lastHeard();
    input.unconfirmed = input.unconfirmed.filter((sent) => sent.at > heard);
    input.unconfirmed.push({ at: Date.now(), data: chunk });
    if (!channel.write(chunk)) stdin.pause();
  };
  channel.on('drain', () => stdin.resume());
  const onResize = () => channel.setWindow(stdout.rows || 24, stdout.columns || 80, 0, 0);
  stdout.on('resize', onResize);
  channel.pipe(stdout, { end: false });
  channel.stderr.pipe(process.stderr, { end: false });

  let status: number | null = null;
  channel.on('exit', (code: number | null, signal?: string) => {
    status = code ?? (signal ? 128 + 1 : 255);
  });
  await new Promise<void>((resolve) => {
    channel.once('close', () => resolve());
    void closed.then(() => resolve());
  });
  input.sink = null;
  stdout.off('resize', onResize);
  stdin.resume();
  return status;
}

/**
 * Attaches to the tmux session and keeps it: when the link dies, what is typed is kept, and the CLI
 * reconnects, sets the mount and the command proxy up again and re-attaches the same session, for up to
 * RECONNECT_WINDOW_MS counted from when the server was last heard.
 */
export async function runSession(options: RunOptions): Promise<number> {
  const mounts = new FolderMountKeeper(options.mountMode, options.cwd, options.config);
  const proxy = new CommandProxy(
    options.config.proxy_commands,
    options.cwd,
    () => mounts.flush(),
    options.config.proxy_git_signing,
  );
  const input: Input = { buffer: new InputBuffer(), sink: null, unconfirmed: [] };
  const status = new StatusLine();
  const stdin = process.stdin;
  if (stdin.isTTY) stdin.setRawMode(true);
  // One reader for the whole run: keys go to the session when there is one, and are kept otherwise.
  const onInput = (chunk: Buffer) => (input.sink ? input.sink(chunk) : input.buffer.push(chunk));
  stdin.on('data', onInput);
  let lastMount = '';
  const reportMount = (outcome: MountOutcome) => {
    const text =
      outcome.mode === 'none' ? `not mounted (${outcome.reason})` : `${outcome.mode} (${outcome.reason})`;
    if (text !== lastMount) process.stderr.write(`ccp: mount: ${text}\r\n`);
    lastMount = text;
  };
  let link = options.first;
  let plan = options.plan;
  try {
    stdin.resume();
    for (;;) {
      const code = await runOnce(link, { ...options, plan }, proxy, input, mounts, reportMount);
      if (code !== null) {
        await mounts.close();
        // tmux ends with 0 when the session's command ended; that command's own failure is told apart here
        // (after the folder is unmounted, so the keeper never sees the extra call).
        const left =
          code === 0 ? Number((await execCollect(link.client, takeStatusScript(plan.name))).stdout) : 0;
        if (left > 0)
          throw new SessionCommandError(sessionEndedMessage(options.config.session_command, left));
        return code;
      }
      // The session exists now: later attaches join it and never take over again.
      plan = { ...plan, fresh: false, takeOver: false };
      const outageStart = link.lastHeard();
      const resend = input.unconfirmed.filter((sent) => sent.at > outageStart).map((sent) => sent.data);
      input.unconfirmed = [];
      input.buffer.prepend(Buffer.concat(resend));
      // Destroyed, not ended: a graceful end waits on the dead link, and so would every request still
      // pending on it (the full mode's sync pass among them) instead of failing now.
      link.client.destroy();
      try {
        link = await reconnect(options, outageStart, status);
      } finally {
        status.clear();
      }
    }
  } catch (error) {
    // tmux did not get to undo its screen when the link died: the error is read on the user's own screen,
    // not under tmux's status line. A session command's end let tmux undo it itself.
    if (!(error instanceof SessionCommandError)) restoreTerminal();
    throw error;
  } finally {
    stdin.off('data', onInput);
    if (stdin.isTTY) stdin.setRawMode(false);
    stdin.pause();
    link.client.end();
  }
}

async function reconnect(options: RunOptions, outageStart: number, status: StatusLine): Promise<Link> {
  const deadline = outageStart + RECONNECT_WINDOW_MS;
  let attempt = 0;
  for (;;) {
    const left = deadline - Date.now();
    const down = Math.round((Date.now() - outageStart) / 1000);
    if (left <= 0) {
      throw new NetworkError(
        `the connection was lost for more than ${RECONNECT_WINDOW_MS / 1000} s. The session keeps running in the workspace; re-attach with: ccp attach --session ${options.plan.name}`,
      );
    }
    status.update(`ccp: connection lost ${down} s ago, reconnecting…`);
    try {
      const link = await openLink(options.target, options.knownHosts, Math.max(2000, left));
      const after = Math.round((Date.now() - outageStart) / 1000);
      process.stderr.write(`\r${yellow(`ccp: reconnected after ${after} s`)}\r\n`);
      return link;
    } catch (error) {
      if (!(error instanceof NetworkError)) throw error;
      attempt += 1;
      await sleep(Math.min(1000 * attempt, 3000, Math.max(0, deadline - Date.now())));
    }
  }
}
