import net, { type Socket } from 'node:net';
import { type ExecResult, RuntimeError, type WorkspaceRuntime } from '../runtime/workspace-runtime.js';
import type { StreamService } from './node-channel.js';
import { ChannelError, type NodeChannelClient } from './node-channel-client.js';

/** Where a host lives: its node (null only for a host made before nodes, which is this gateway's). */
export interface PlacedHost {
  id: string;
  node: string | null;
}

/**
 * No way to the host's service. `no_path`: the host has none now (as a host without endpoints: not running);
 * `unreachable`: it has one, but the workspace did not answer; `node_unreachable`: the node holding the host
 * did not answer this gateway.
 */
export class HostUnreachable extends Error {
  constructor(
    readonly reason: 'no_path' | 'unreachable' | 'node_unreachable',
    message: string,
    options?: { cause: unknown },
  ) {
    super(message, options);
    this.name = 'HostUnreachable';
  }
}

export interface HostDialerOptions {
  runtime: WorkspaceRuntime;
  /** Whether a node name is this gateway's own (NodeRegistry). */
  isLocal: (node: string) => boolean;
  channel: NodeChannelClient;
  /** Time the workspace (or the node relaying it) has to accept the connection. */
  connectTimeoutMs?: number;
}

const SERVICE_NAMES: Record<StreamService, string> = { ssh: 'SSH service', desktop: 'desktop' };

/**
 * Reaches a host's services wherever its containers are: on this gateway's engine directly, on another node
 * through that node's internal channel, which resolves and dials the endpoints on its own machine. Nothing here
 * dials another machine's container addresses.
 */
export class HostDialer {
  private readonly connectTimeoutMs: number;
  /** Streams open now to each of this engine's hosts, whichever gateway the session came in at. */
  private readonly streams = new Map<string, number>();

  constructor(private readonly options: HostDialerOptions) {
    this.connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
  }

  /** The node holding the host when it is not this gateway's; null for a host of this gateway. */
  remoteNode(host: PlacedHost): string | null {
    return host.node === null || this.options.isLocal(host.node) ? null : host.node;
  }

  /**
   * Whether the host has a path to its services now: endpoints on this engine; for another node's host, the
   * node checks when a stream is asked for (a page load is not worth a round trip to it).
   */
  async hasPath(host: PlacedHost): Promise<boolean> {
    return this.remoteNode(host) !== null || (await this.options.runtime.endpoints(host.id)) !== null;
  }

  /** A byte stream to one service of a running host. */
  async open(host: PlacedHost, service: StreamService): Promise<Socket> {
    const node = this.remoteNode(host);
    if (!node) return this.openLocal(host.id, service);
    const { socket } = await this.options.channel
      .request(node, { host: host.id, service }, this.connectTimeoutMs + 5_000)
      .catch((error: unknown) => {
        throw unreachableThrough(node, SERVICE_NAMES[service], error);
      });
    return socket;
  }

  /**
   * Runs a command in a host's workspace, as WorkspaceRuntime.exec does (null when it is not running), wherever
   * the host lives; HostUnreachable when its node does not answer.
   */
  async exec(host: PlacedHost, command: string[], timeoutMs: number): Promise<ExecResult | null> {
    const node = this.remoteNode(host);
    if (!node) return this.options.runtime.exec(host.id, command, timeoutMs);
    let reply: Awaited<ReturnType<NodeChannelClient['request']>>;
    try {
      reply = await this.options.channel.request(
        node,
        { host: host.id, service: 'exec', command, timeout_ms: timeoutMs },
        timeoutMs + 5_000,
      );
    } catch (error) {
      if (error instanceof ChannelError && error.code === 'runtime')
        throw new RuntimeError(error.runtimeCode ?? 'runtime_failed', error.message);
      if (error instanceof ChannelError && (error.code === 'no_path' || error.code === 'host_not_running'))
        return null;
      throw unreachableThrough(node, 'workspace', error);
    }
    reply.socket.destroy();
    return reply.result.result ?? null;
  }

  /** Connects to the service on this gateway's own engine; the internal channel serves its peers with this. */
  async openLocal(hostId: string, service: StreamService): Promise<Socket> {
    const endpoints = await this.options.runtime.endpoints(hostId);
    if (!endpoints)
      throw new HostUnreachable('no_path', `The host has no path to its ${SERVICE_NAMES[service]}`);
    const { host, port } = endpoints[service];
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host, port });
      const fail = (error: Error) => {
        socket.destroy();
        reject(
          new HostUnreachable(
            'unreachable',
            `The host's ${SERVICE_NAMES[service]} does not answer (${(error as NodeJS.ErrnoException).code ?? error.message})`,
            { cause: error },
          ),
        );
      };
      socket.setTimeout(this.connectTimeoutMs, () => fail(new Error('no answer in time')));
      let connected = false;
      // One listener for the socket's whole life: before the connect a failure is the dial's, after it
      // whoever takes the stream hears it as its close.
      socket.on('error', (error) => {
        if (!connected) fail(error);
      });
      socket.once('connect', () => {
        connected = true;
        socket.setTimeout(0);
        socket.setNoDelay(true);
        this.streams.set(hostId, (this.streams.get(hostId) ?? 0) + 1);
        socket.once('close', () => {
          const left = (this.streams.get(hostId) ?? 1) - 1;
          if (left > 0) this.streams.set(hostId, left);
          else this.streams.delete(hostId);
        });
        resolve(socket);
      });
    });
  }

  /**
   * SSH, desktop and ccp sessions open now to a host of this engine: each holds a stream to its workspace, those
   * that came in at another gateway too (through the internal channel).
   */
  openStreams(hostId: string): number {
    return this.streams.get(hostId) ?? 0;
  }
}

/** What a user is told when another node did not relay: which node, never its address or the engine's words. */
function unreachableThrough(node: string, what: string, error: unknown): HostUnreachable {
  const cause = { cause: error };
  const code = error instanceof ChannelError ? error.code : null;
  if (code === 'no_path' || code === 'host_not_running')
    return new HostUnreachable('no_path', `The host has no path to its ${what} on its node ${node}`, cause);
  if (code === 'unreachable')
    return new HostUnreachable(
      'unreachable',
      `The host's ${what} does not answer on its node ${node}`,
      cause,
    );
  const message = `The host runs on node ${node}, which does not answer this gateway`;
  return new HostUnreachable('node_unreachable', message, cause);
}
