import tls, { type TLSSocket } from 'node:tls';
import {
  CHANNEL_TLS,
  type ChannelRefusal,
  type ChannelReply,
  type ChannelRequest,
  MAX_REPLY_BYTES,
  parseReply,
  readLine,
} from './node-channel.js';

export interface NodeChannelClientOptions {
  /** This gateway's node name: its PSK identity. */
  self: string;
  /** This node's channel key (nodeChannelKey). */
  key: Buffer;
  /** The registered node of that name, for its internal address. */
  findNode: (name: string) => Promise<{ internal_address: string | null } | undefined>;
  /** Time for the connection and the TLS handshake. */
  connectTimeoutMs?: number;
}

/** Why a request through the channel failed: the serving node's refusal, or no node to ask. */
export class ChannelError extends Error {
  constructor(
    readonly code: ChannelRefusal | 'node_unknown' | 'no_channel' | 'node_unreachable',
    message: string,
    /** For `runtime`: the engine's code on the serving node. */
    readonly runtimeCode?: string,
  ) {
    super(message);
    this.name = 'ChannelError';
  }
}

/** Asks another node's gateway, over its internal channel, to relay a service of a host it holds. */
export class NodeChannelClient {
  constructor(private readonly options: NodeChannelClientOptions) {}

  /**
   * Sends `request` to `node` and waits `replyTimeoutMs` for its answer. On success the socket is the host's
   * service for a stream request (its first bytes may already be buffered), and spent for an exec.
   */
  async request(
    node: string,
    request: ChannelRequest,
    replyTimeoutMs: number,
  ): Promise<{ socket: TLSSocket; result: ChannelReply & { ok: true } }> {
    const found = await this.options.findNode(node);
    if (!found) throw new ChannelError('node_unknown', `node ${node} is not registered`);
    if (!found.internal_address)
      throw new ChannelError(
        'no_channel',
        `node ${node} takes no relayed sessions (it has no INTERNAL_BIND)`,
      );
    const socket = await this.connect(node, found.internal_address);
    try {
      socket.write(`${JSON.stringify(request)}\n`);
      const line = await readLine(socket, MAX_REPLY_BYTES, replyTimeoutMs).catch((error: Error) => {
        throw new ChannelError('node_unreachable', `node ${node} gave no answer: ${error.message}`);
      });
      const reply = parseReply(line);
      if (!reply) throw new ChannelError('node_unreachable', `node ${node} answered something else`);
      if (!reply.ok) throw new ChannelError(reply.code, reply.message, reply.runtime_code);
      return { socket, result: reply };
    } catch (error) {
      socket.destroy();
      throw error;
    }
  }

  private connect(node: string, address: string): Promise<TLSSocket> {
    const match = /^(.+):(\d{1,5})$/.exec(address);
    if (!match)
      throw new ChannelError('no_channel', `node ${node} registered no usable address (${address})`);
    const { self, key } = this.options;
    return new Promise((resolve, reject) => {
      const socket = tls.connect({
        host: match[1]!.replace(/^\[(.*)\]$/, '$1'),
        port: Number(match[2]),
        ...CHANNEL_TLS,
        // The server names itself in its hint: anything but the node meant is not dialled into (a stale or
        // mistyped INTERNAL_ADDRESS), whatever key it holds.
        pskCallback: (hint) => (hint === node ? { psk: key, identity: self } : null),
        // No certificate to check: completing the handshake proves the server holds the key.
        checkServerIdentity: () => undefined,
      });
      const fail = (error: Error) => {
        clearTimeout(timer);
        socket.destroy();
        reject(
          new ChannelError(
            'node_unreachable',
            `node ${node} does not answer at ${address}: ${(error as NodeJS.ErrnoException).code ?? error.message}`,
          ),
        );
      };
      const timer = setTimeout(
        () => fail(new Error('no handshake in time')),
        this.options.connectTimeoutMs ?? 5_000,
      );
      let connected = false;
      // One listener for the socket's whole life: before the handshake a failure is the dial's, after it whoever
      // takes the stream hears it as its close (unheard, an error would end the process).
      socket.on('error', (error) => {
        if (!connected) fail(error);
      });
      socket.once('secureConnect', () => {
        connected = true;
        clearTimeout(timer);
        // Keystrokes and small round trips: no Nagle; a dead peer is noticed without traffic.
        socket.setNoDelay(true);
        socket.setKeepAlive(true, 15_000);
        resolve(socket);
      });
    });
  }
}
