import { randomBytes } from 'node:crypto';
import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import pino from 'pino';
import { HostDialer } from '../../src/cluster/host-dialer.js';
import { nodeChannelKey } from '../../src/cluster/node-channel.js';
import { NodeChannelClient } from '../../src/cluster/node-channel-client.js';
import { NodeChannelServer } from '../../src/cluster/node-channel-server.js';
import { SecretBox } from '../../src/domain/access/secret-box.js';
import type { WorkspaceSpec } from '../../src/runtime/workspace-runtime.js';
import { isDesktopControl } from '../../src/vnc/desktop-control.js';
import { MemoryRuntime } from './memory-runtime.js';

/** A workspace service stand-in: greets at once (as sshd does), then echoes; counts the connections it got. */
export class EchoService {
  readonly sockets: Socket[] = [];
  private readonly server: Server = createServer((socket) => {
    this.sockets.push(socket);
    socket.on('error', () => {});
    socket.write(`hello ${this.sockets.length}\n`);
    socket.pipe(socket);
  });

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return (this.server.address() as AddressInfo).port;
  }

  close(): void {
    for (const socket of this.sockets) socket.destroy();
    this.server.close();
  }
}

/**
 * Node `a`'s internal channel in front of a MemoryRuntime whose hosts' services are an EchoService, and the
 * registered nodes `a` and `b` sharing one secret key; `clientAs` dials it as any node with any key.
 */
export class ChannelPeers {
  readonly box = SecretBox.fromKey(randomBytes(32));
  readonly runtime = new MemoryRuntime();
  readonly service = new EchoService();
  /** Hosts as the database has them. */
  readonly hosts = new Map<string, { node: string | null; status: string }>();
  readonly nodes = new Set(['a', 'b']);
  readonly server: NodeChannelServer;
  address = '';

  constructor(requestTimeoutMs = 1_000) {
    const local = new HostDialer({
      runtime: this.runtime,
      isLocal: (node) => node === 'a',
      channel: this.clientAs('a'),
    });
    this.server = new NodeChannelServer({
      bind: { host: '127.0.0.1', port: 0 },
      self: 'a',
      keyOf: (name) => nodeChannelKey(this.box, name),
      isNode: async (name) => this.nodes.has(name),
      findHost: async (hostId) => this.hosts.get(hostId),
      local: {
        open: (hostId, service) => local.openLocal(hostId, service),
        exec: (hostId, command) => this.runtime.exec(hostId, command),
      },
      execAllowed: isDesktopControl,
      log: pino({ level: 'silent' }),
      requestTimeoutMs,
    });
  }

  async start(): Promise<void> {
    const port = await this.service.listen();
    this.runtime.sshEndpoint = { host: '127.0.0.1', port };
    this.runtime.desktopEndpoint = { host: '127.0.0.1', port };
    await this.server.listen();
    this.address = `127.0.0.1:${this.server.port}`;
  }

  /** A host placed on `node`, running in `a`'s runtime when it is placed there and running. */
  addHost(node: string, status = 'running'): string {
    const id = `host-${randomBytes(4).toString('hex')}`;
    this.hosts.set(id, { node, status });
    if (node === 'a' && status === 'running')
      this.runtime.hosts.set(id, { state: 'running', upstream: null, spec: {} as WorkspaceSpec });
    return id;
  }

  /** A client that calls itself `self` and proves it with `key` (that node's own key by default). */
  clientAs(self: string, key = nodeChannelKey(this.box, self)): NodeChannelClient {
    return new NodeChannelClient({
      self,
      key,
      findNode: async (name) => (name === 'a' ? { internal_address: this.address } : undefined),
      connectTimeoutMs: 2_000,
    });
  }

  async close(): Promise<void> {
    await this.server.close();
    this.service.close();
  }
}
