import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { type AddressInfo, createServer, type Server as NetServer } from 'node:net';
import ssh2 from 'ssh2';
import { generateEd25519 } from '../../../gateway/src/domain/users/ssh-public-key.js';

/** Debian's openssh-sftp-server. */
export const SFTP_SERVER = '/usr/lib/openssh/sftp-server';

/**
 * A small SSH server for tests that runs each exec request as a local `sh -c` (with the given environment),
 * serves remote forwards (-R) on this machine's loopback and the `sftp` subsystem, as the workspace's sshd
 * does in the workspace.
 */
export async function startLocalSshd(
  env: NodeJS.ProcessEnv,
  rewrite: (command: string) => string = (command) => command,
  /** Announce the server as OpenSSH: ssh2 then swaps SFTP symlink arguments as OpenSSH's sftp-server wants. */
  asOpenSsh = false,
): Promise<{ port: number; close: () => void }> {
  const listeners: NetServer[] = [];
  const server = new ssh2.Server(
    {
      hostKeys: [generateEd25519('test host').privateKey],
      ...(asOpenSsh ? { ident: 'OpenSSH_9.2p1' } : {}),
    },
    (connection) => {
      connection.on('authentication', (context) => context.accept());
      connection.on('request', (accept, reject, name, info) => {
        if (name !== 'tcpip-forward') return reject?.();
        const listener = createServer((socket) => {
          const remote = socket.remoteAddress ?? '127.0.0.1';
          connection.forwardOut(info.bindAddr, port, remote, socket.remotePort ?? 0, (error, channel) => {
            if (error) return socket.destroy();
            socket.pipe(channel).pipe(socket);
          });
        });
        let port = 0;
        listener.listen(info.bindPort, info.bindAddr, () => {
          port = (listener.address() as AddressInfo).port;
          accept?.(port);
        });
        listeners.push(listener);
      });
      connection.on('session', (acceptSession) => {
        const session = acceptSession();
        // The `sftp` subsystem is OpenSSH's own sftp-server, as in the workspace.
        session.on('subsystem', (acceptSubsystem, reject, info) => {
          if (info.name !== 'sftp' || !existsSync(SFTP_SERVER)) return reject?.();
          const channel = acceptSubsystem();
          const child = spawn(SFTP_SERVER, [], { stdio: ['pipe', 'pipe', 'inherit'], env });
          channel.pipe(child.stdin);
          child.stdout.pipe(channel);
          channel.on('close', () => child.kill());
        });
        session.on('exec', (acceptExec, _reject, info) => {
          const channel = acceptExec();
          const child = spawn('sh', ['-c', rewrite(info.command)], { stdio: 'pipe', env });
          channel.pipe(child.stdin);
          // Not ending the channel with stdout: the exit status must be sent before the channel closes.
          child.stdout.pipe(channel, { end: false });
          child.stderr.pipe(channel.stderr, { end: false });
          child.on('close', (code) => {
            channel.exit(code ?? 1);
            channel.end();
          });
          channel.on('close', () => child.kill());
        });
      });
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => {
      for (const listener of listeners) listener.close();
      server.close();
    },
  };
}
