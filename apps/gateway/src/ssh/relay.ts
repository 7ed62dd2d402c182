import type { Duplex } from 'node:stream';
import type { Client, ClientChannel, Connection, PseudoTtyInfo, ServerChannel, Session } from 'ssh2';
import { openSessionChannel, type SessionStart, startSession } from './ssh2-internals.js';

/** Bytes moved through one proxied connection, for the session-closed event. */
export interface Traffic {
  toWorkspace: number;
  toClient: number;
}

const ignore = () => {};

/** Pipes a client channel and a workspace channel both ways (forwarded ports, agent); either close ends both. */
export function splice(client: Duplex, workspace: Duplex, traffic: Traffic): void {
  client.on('data', (chunk: Buffer) => {
    traffic.toWorkspace += chunk.length;
  });
  workspace.on('data', (chunk: Buffer) => {
    traffic.toClient += chunk.length;
  });
  client.pipe(workspace);
  workspace.pipe(client);
  const closeBoth = () => {
    client.destroy();
    workspace.destroy();
  };
  client.on('close', closeBoth).on('error', ignore);
  workspace.on('close', closeBoth).on('error', ignore);
}

/**
 * One session channel: the workspace's channel is opened at once, beside it (an exec through the proxy then waits
 * for no round trip more than a direct one); the requests that prepare it (pty, env, agent) are collected until
 * the client asks for the shell, command or subsystem, which is then sent to the workspace with the same
 * preparation, all at once; after that, window changes and signals are passed on and the exit status comes back
 * before the channel closes. Subsystems in `ownSubsystems` are served by the gateway itself. Channels with a
 * terminal (a shell or a command with a pty) are in `terminals` while open, for the gateway's own notices.
 */
export function relaySession(
  session: Session,
  upstream: Client,
  traffic: Traffic,
  ownSubsystems: Record<string, (channel: ServerChannel) => void> = {},
  terminals?: Set<ServerChannel>,
): void {
  let pty: PseudoTtyInfo | null = null;
  const env: Record<string, string> = {};
  let agent = false;
  let workspace: ClientChannel | null = null;
  let started = false;
  const early = openSessionChannel(upstream);
  early.catch(ignore);
  // A session the client closes before starting anything leaves no channel open on the workspace.
  session.once('close', () => {
    if (!started) early.then((channel) => channel.close(), ignore);
  });

  // ssh2 passes no accept/reject when the client wanted no reply; hence the optional calls.
  session.on('pty', (accept, _reject, info) => {
    pty = info;
    accept?.();
  });
  session.on('env', (accept, _reject, info) => {
    env[info.key] = info.val;
    accept?.();
  });
  session.on('auth-agent', (accept) => {
    agent = true;
    accept?.();
  });
  session.on('window-change', (accept, _reject, info) => {
    if (workspace) workspace.setWindow(info.rows, info.cols, info.height, info.width);
    else if (pty) pty = { ...pty, ...info };
    accept?.();
  });
  session.on('signal', (accept, _reject, info) => {
    workspace?.signal(info.name);
    accept?.();
  });

  const start = (what: SessionStart, accept: () => ServerChannel) => {
    started = true;
    // Accepted before the workspace side exists: ssh2 refuses a late accept once the client has sent EOF,
    // which OpenSSH does straight after the command when its stdin is empty. Input waits in the channel.
    const client = accept();
    if (!client) return;
    client.on('error', ignore);
    let clientClosed = false;
    client.once('close', () => {
      clientClosed = true;
      terminals?.delete(client);
    });
    if (pty && what.kind !== 'subsystem') terminals?.add(client);
    const opened = (error: Error | undefined, channel?: ClientChannel) => {
      if (error || !channel) {
        client.stderr.write(`cloud-cli-proxy: the workspace refused the session: ${error?.message}\r\n`);
        client.exit(1);
        client.end();
        return;
      }
      if (clientClosed) return channel.close();
      workspace = channel;
      joinSession(client, channel, traffic);
    };
    // The sftp subsystem is passed through as it is, with no preparation: the workspace's sshd serves it.
    const preparation =
      what.kind === 'subsystem' ? { pty: null, env: {}, agent: false } : { pty, env, agent };
    early.then(
      (channel) =>
        startSession(upstream, channel, preparation, what, (error) => {
          if (!error) return opened(undefined, channel);
          channel.close();
          opened(error);
        }),
      (error: Error) => opened(error),
    );
  };
  session.on('shell', (accept) => start({ kind: 'shell' }, accept));
  session.on('exec', (accept, _reject, info) => start({ kind: 'exec', command: info.command }, accept));
  session.on('subsystem', (accept, _reject, info) => {
    const own = Object.hasOwn(ownSubsystems, info.name) ? ownSubsystems[info.name] : undefined;
    if (own) {
      started = true;
      early.then((channel) => channel.close(), ignore);
      own(accept());
    } else start({ kind: 'subsystem', name: info.name }, accept);
  });
}

function joinSession(client: ServerChannel, workspace: ClientChannel, traffic: Traffic): void {
  client.on('data', (chunk: Buffer) => {
    traffic.toWorkspace += chunk.length;
  });
  const countOut = (chunk: Buffer) => {
    traffic.toClient += chunk.length;
  };
  workspace.on('data', countOut);
  workspace.stderr.on('data', countOut);
  client.pipe(workspace);
  // Not ended by the pipes: the exit status has to go out before the client's channel closes.
  workspace.pipe(client, { end: false });
  workspace.stderr.pipe(client.stderr, { end: false });

  let exit: [number] | [string, boolean, string] | null = null;
  workspace.on('exit', (code: number | null, signal?: string, dumped?: boolean, description?: string) => {
    exit = code === null ? [signal ?? 'KILL', dumped ?? false, description ?? ''] : [code];
  });
  let pending = 3; // stdout, stderr and the channel itself
  const done = () => {
    if (--pending > 0) return;
    // An empty write completes after everything queued before it, so the exit status follows the output.
    client.write(Buffer.alloc(0), () => {
      if (exit) (client.exit as (...args: unknown[]) => void)(...exit);
      client.end();
    });
  };
  workspace.once('end', done);
  workspace.stderr.once('end', done);
  workspace.once('close', done);
  client.on('close', () => workspace.close());
  workspace.on('error', ignore);
}

/** `-L`: the client's direct-tcpip channels are opened from the workspace side. */
export function relayLocalForwards(connection: Connection, upstream: Client, traffic: Traffic): void {
  connection.on('tcpip', (accept, reject, info) => {
    upstream.forwardOut(info.srcIP, info.srcPort, info.destIP, info.destPort, (error, channel) => {
      if (error) return reject();
      splice(accept(), channel, traffic);
    });
  });
}

/** `-R`: listening is asked of the workspace's sshd, and each connection it reports is opened to the client. */
export function relayRemoteForwards(connection: Connection, upstream: Client, traffic: Traffic): void {
  connection.on('request', (accept, reject, name, info) => {
    if (name === 'tcpip-forward') {
      upstream.forwardIn(info.bindAddr, info.bindPort, (error, port) =>
        error ? reject?.() : accept?.(port),
      );
    } else if (name === 'cancel-tcpip-forward') {
      upstream.unforwardIn(info.bindAddr, info.bindPort, (error) => (error ? reject?.() : accept?.()));
    } else {
      reject?.();
    }
  });
  upstream.on('tcp connection', (details, accept, reject) => {
    connection.forwardOut(
      details.destIP,
      details.destPort,
      details.srcIP,
      details.srcPort,
      (error, channel) => {
        if (error) return reject();
        splice(channel, accept(), traffic);
      },
    );
  });
}
