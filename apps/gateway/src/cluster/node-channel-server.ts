import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import tls, { type TLSSocket } from 'node:tls';
import type { Logger } from 'pino';
import { type ExecResult, RuntimeError } from '../runtime/workspace-runtime.js';
import { HostUnreachable } from './host-dialer.js';
import {
  CHANNEL_TLS,
  type ChannelReply,
  type ChannelRequest,
  MAX_REQUEST_BYTES,
  parseRequest,
  REQUEST_TIMEOUT_MS,
  readLine,
  type StreamService,
} from './node-channel.js';

export interface NodeChannelServerOptions {
  bind: { host: string; port: number };
  /** This node's name, sent as the PSK identity hint so clients know whom they reached. */
  self: string;
  /** The key of node `name` (nodeChannelKey). */
  keyOf: (name: string) => Buffer;
  /** Whether `name` is a registered node: the only peers served. */
  isNode: (name: string) => Promise<boolean>;
  findHost: (hostId: string) => Promise<{ node: string | null; status: string } | undefined>;
  /** This node's own hosts: their services (HostDialer.openLocal) and commands (WorkspaceRuntime.exec). */
  local: {
    open: (hostId: string, service: StreamService) => Promise<Duplex>;
    exec: (hostId: string, command: string[], timeoutMs: number) => Promise<ExecResult | null>;
  };
  /** The only commands peers may run in a workspace (the desktop's controls). */
  execAllowed: (command: string[]) => boolean;
  log: Logger;
  /** The time a peer has for its handshake, and then for its request line (REQUEST_TIMEOUT_MS). */
  requestTimeoutMs?: number;
}

/** Refused with a reason the asking node passes on (never a secret, never a container address). */
class Refused extends Error {
  constructor(
    readonly reply: ChannelReply & { ok: false },
    readonly detail?: unknown,
  ) {
    super(reply.message);
  }
}

const refuse = (code: (ChannelReply & { ok: false })['code'], message: string, detail?: unknown) =>
  new Refused({ ok: false, code, message }, detail);

/**
 * The internal channel's listener (INTERNAL_BIND): other nodes' gateways ask it for a service of a host placed
 * on this node; it checks the peer, the host and its placement, dials the service on this machine and relays.
 */
export class NodeChannelServer {
  private readonly server: tls.Server;
  private readonly identities = new WeakMap<TLSSocket, string>();
  /** Every connection, relayed or not: close() ends them (and a relay ends its service with its peer). */
  private readonly live = new Set<Socket>();
  private readonly requestTimeoutMs: number;

  constructor(private readonly options: NodeChannelServerOptions) {
    this.requestTimeoutMs = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
    this.server = tls.createServer(
      {
        ...CHANNEL_TLS,
        pskIdentityHint: options.self,
        handshakeTimeout: this.requestTimeoutMs,
        // A peer that ends its side still gets what the service sends after (pipe ends each side in turn).
        allowHalfOpen: true,
        // Any identity gets its key (only holders of secrets.key can finish the handshake with it); whether it
        // is a registered node is looked up after, as that takes the database.
        pskCallback: (socket, identity) => {
          this.identities.set(socket, identity);
          return options.keyOf(identity);
        },
      },
      (socket) => this.serve(socket),
    );
    this.server.on('connection', (raw: Socket) => {
      this.live.add(raw);
      raw.once('close', () => this.live.delete(raw));
    });
    this.server.on('tlsClientError', (error, socket) => {
      // Node leaves the connection open once this event has a listener (a handshake timeout included).
      socket.destroy();
      options.log.warn(
        { err: error, peer: socket.remoteAddress },
        'a peer failed the internal channel handshake (not a node, or a different secrets.key)',
      );
    });
  }

  async listen(): Promise<void> {
    const { host, port } = this.options.bind;
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.server.on('error', (error) => this.options.log.error({ err: error }, 'internal channel error'));
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** Stops listening and ends every relayed stream. */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const stream of this.live) stream.destroy();
    await closed;
  }

  private serve(socket: TLSSocket): void {
    const peer = this.identities.get(socket) ?? '';
    const log = this.options.log.child({ peer_node: peer, peer_address: socket.remoteAddress });
    socket.on('error', (error) => log.debug({ err: error }, 'internal channel connection error'));
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 15_000);
    let request: ChannelRequest | null = null;
    this.admit(socket, peer)
      .then(async (asked) => {
        request = asked;
        if (asked.service === 'exec') {
          const result = await this.options.local.exec(asked.host, asked.command, asked.timeout_ms);
          socket.end(`${JSON.stringify({ ok: true, result })}\n`);
          return;
        }
        const upstream = await this.options.local.open(asked.host, asked.service);
        if (socket.destroyed) return upstream.destroy();
        socket.write(`${JSON.stringify({ ok: true })}\n`);
        relay(socket, upstream);
        log.debug({ host_id: asked.host, service: asked.service }, 'relaying a session for another node');
      })
      .catch((error: unknown) => {
        const refusal = refusalOf(error);
        log.warn(
          { err: refusal.detail, code: refusal.reply.code, request },
          `refused an internal channel request: ${refusal.message}`,
        );
        if (socket.destroyed) return;
        socket.end(`${JSON.stringify(refusal.reply)}\n`);
        socket.setTimeout(this.requestTimeoutMs, () => socket.destroy()); // a peer that never reads its refusal
      });
  }

  /** The peer's request, once the peer is a node and the host is one this node serves. */
  private async admit(socket: TLSSocket, peer: string): Promise<ChannelRequest> {
    const [line, known] = await Promise.all([
      readLine(socket, MAX_REQUEST_BYTES, this.requestTimeoutMs).catch((error: Error) => {
        throw refuse('bad_request', `no request: ${error.message}`);
      }),
      this.options.isNode(peer),
    ]);
    if (!known) throw refuse('unknown_node', `${peer || 'this peer'} is not a registered node`);
    const request = parseRequest(line);
    if (!request) throw refuse('bad_request', 'not a request of the internal channel');
    const host = await this.options.findHost(request.host);
    if (!host) throw refuse('unknown_host', `no host ${request.host}`);
    if (host.node !== this.options.self)
      throw refuse('not_here', `host ${request.host} is not placed on node ${this.options.self}`);
    if (host.status !== 'running') throw refuse('host_not_running', `host ${request.host} is ${host.status}`);
    if (request.service === 'exec' && !this.options.execAllowed(request.command))
      throw refuse('not_allowed', 'that command is not one other nodes may run');
    return request;
  }
}

/** What the asking node is told: the reason of a refusal, the engine's code of a failed command. */
function refusalOf(error: unknown): Refused {
  if (error instanceof Refused) return error;
  if (error instanceof HostUnreachable)
    return refuse(error.reason === 'no_path' ? 'no_path' : 'unreachable', error.message, error.cause);
  if (error instanceof RuntimeError)
    return new Refused({ ok: false, code: 'runtime', message: error.message, runtime_code: error.code });
  return refuse('unreachable', 'the node failed to serve the request', error);
}

/** Pipes both ways with backpressure (pipe pauses a side while the other's buffer is full); when either side
 * fails or the peer goes, both are gone. */
function relay(socket: TLSSocket, upstream: Duplex): void {
  const gone = () => {
    socket.destroy();
    upstream.destroy();
  };
  socket.on('error', gone);
  upstream.on('error', gone);
  socket.once('close', gone);
  // The service's last bytes still reach the peer: the socket ends after them, and is cut if the peer lingers.
  upstream.once('close', () => {
    socket.end();
    setTimeout(gone, REQUEST_TIMEOUT_MS).unref();
  });
  socket.pipe(upstream);
  upstream.pipe(socket);
}
