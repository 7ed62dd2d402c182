import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import ssh2, { type Client } from 'ssh2';
import { type HostDialer, HostUnreachable } from '../cluster/host-dialer.js';
import type { WorkspaceLogin } from '../domain/access/access.js';
import { errors } from '../domain/errors.js';
import { linuxUserFor } from '../domain/hosts/host-view.js';
import { shareablePort } from '../domain/shares/shareable-port.js';

export interface PortTunnelsOptions {
  /** Reaches the workspace's sshd, on this node or through the host's node (the internal channel). */
  dialer: HostDialer;
  log: Logger;
  /** A login with no stream open for this long is closed. */
  idleMs?: number;
  readyMs?: number;
}

interface Tunnel {
  client: Promise<Client>;
  streams: number;
  idle: NodeJS.Timeout | null;
}

/**
 * TCP streams to ports of a workspace, from inside it: one SSH login per host as its owner's Linux user (the
 * gateway's key, as the browser terminal), and a direct-tcpip channel per stream to 127.0.0.1:port there. So a
 * dev server listening on loopback is reached, the host's node is reached wherever it is, and the workspace
 * sees a connection from its own user, with nothing of the gateway's network opened to it.
 */
export class PortTunnels {
  private readonly tunnels = new Map<string, Tunnel>();

  constructor(private readonly options: PortTunnelsOptions) {}

  /** A stream to `port` on the host's loopback; 503 `workspace_unreachable` when nothing answers there. */
  async open(login: WorkspaceLogin, port: number): Promise<Duplex> {
    if (!shareablePort(port))
      throw errors.forbidden(`Port ${port} of a workspace is not one a share reaches`);
    const tunnel = this.tunnelFor(login);
    const client = await tunnel.client;
    return new Promise((resolve, reject) => {
      client.forwardOut('127.0.0.1', 0, '127.0.0.1', port, (error, channel) => {
        if (error) {
          reject(
            errors.unavailable(
              'port_not_listening',
              `Nothing in host ${login.host.shortId} answers on port ${port}; start the app there (listening on 127.0.0.1 or 0.0.0.0) and reload`,
            ),
          );
          return this.release(login.host.id, tunnel, false);
        }
        tunnel.streams++;
        if (tunnel.idle) clearTimeout(tunnel.idle);
        tunnel.idle = null;
        channel.once('close', () => this.release(login.host.id, tunnel, true));
        resolve(channel);
      });
    });
  }

  /** Ends every login (and so every stream). */
  close(): void {
    for (const [hostId, tunnel] of this.tunnels) this.drop(hostId, tunnel);
  }

  private tunnelFor(login: WorkspaceLogin): Tunnel {
    const found = this.tunnels.get(login.host.id);
    if (found) return found;
    const tunnel: Tunnel = { client: this.connect(login), streams: 0, idle: null };
    this.tunnels.set(login.host.id, tunnel);
    tunnel.client.then(
      (client) => {
        client.once('close', () => {
          if (this.tunnels.get(login.host.id) === tunnel) this.tunnels.delete(login.host.id);
        });
        this.release(login.host.id, tunnel, false);
      },
      () => {
        if (this.tunnels.get(login.host.id) === tunnel) this.tunnels.delete(login.host.id);
      },
    );
    return tunnel;
  }

  private release(hostId: string, tunnel: Tunnel, closed: boolean): void {
    if (closed) tunnel.streams--;
    if (tunnel.streams > 0 || tunnel.idle) return;
    tunnel.idle = setTimeout(() => this.drop(hostId, tunnel), this.options.idleMs ?? 60_000);
    tunnel.idle.unref();
  }

  private drop(hostId: string, tunnel: Tunnel): void {
    if (tunnel.idle) clearTimeout(tunnel.idle);
    if (this.tunnels.get(hostId) === tunnel) this.tunnels.delete(hostId);
    tunnel.client.then(
      (client) => client.end(),
      () => {},
    );
  }

  private async connect({ host, workspaceKey: key }: WorkspaceLogin): Promise<Client> {
    if (host.status !== 'running')
      throw errors.conflict(
        'host_not_running',
        `Host ${host.shortId} is not running; its owner starts it first`,
      );
    if (!key) throw errors.conflict('host_not_running', 'The host has not finished its first start');
    const sock = await this.options.dialer.open(host, 'ssh').catch((error: unknown) => {
      if (!(error instanceof HostUnreachable)) throw error;
      this.options.log.warn({ err: error, host_id: host.id }, 'reaching the workspace for a share failed');
      throw errors.unavailable('workspace_unreachable', error.message);
    });
    const client = new ssh2.Client();
    return new Promise((resolve, reject) => {
      let ready = false;
      client.on('error', (error: Error) => {
        if (ready) return this.options.log.debug({ err: error }, 'share tunnel connection error');
        client.end();
        sock.destroy();
        reject(
          errors.unavailable(
            'workspace_unreachable',
            `host ${host.shortId} is running but its SSH service does not answer; try again shortly`,
          ),
        );
      });
      client.once('ready', () => {
        ready = true;
        resolve(client);
      });
      client.connect({
        sock,
        username: linuxUserFor(host.ownerUsername),
        privateKey: key,
        authHandler: ['publickey'],
        readyTimeout: this.options.readyMs ?? 15_000,
        keepaliveInterval: 15_000,
        keepaliveCountMax: 3,
        // As the SSH proxy: reached only through the host's relay, with no recorded host key to pin.
        hostVerifier: () => true,
      });
    });
  }
}
