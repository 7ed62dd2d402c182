import { randomFillSync } from 'node:crypto';
import { createRequire } from 'node:module';
import net, { type Socket } from 'node:net';
import type { Client, ClientChannel, Connection, PseudoTtyInfo, ServerChannel } from 'ssh2';

// ssh2 1.17 has no public way for a server to send a banner after the first one, to open an agent channel
// towards its client, or to drop a client's connection outright, nor for a client to open a session channel
// before it knows what to start there or to send that channel's requests without waiting for each reply,
// although its internals can do all of these. These
// helpers reach into them, kept here so an ssh2 upgrade has exactly one place to check.
const require = createRequire(import.meta.url);
const { sendPacket } = require('ssh2/lib/protocol/utils.js') as {
  sendPacket(protocol: unknown, packet: Buffer): boolean;
};
const { MAX_WINDOW, PACKET_SIZE } = require('ssh2/lib/Channel.js') as {
  MAX_WINDOW: number;
  PACKET_SIZE: number;
};

const USERAUTH_BANNER = 53;

/**
 * Whether ssh2's native crypto binding loaded. Without it (built for another Node.js, or not built) ssh2 falls
 * back to JavaScript ciphers without a word, and the proxy moves a fraction of its bytes.
 */
export const nativeCryptoLoaded: boolean = (
  require('ssh2/lib/protocol/crypto.js') as { bindingAvailable: boolean }
).bindingAvailable;

/** The one start-up line for an SSH proxy running on JavaScript ciphers; nothing when the binding loaded. */
export function nativeCryptoWarning(loaded = nativeCryptoLoaded): string | null {
  return loaded
    ? null
    : "ssh2's native crypto binding did not load (built for another Node.js?): the SSH proxy runs on JavaScript " +
        'ciphers at a fraction of its speed; `npm rebuild ssh2` with the node that runs the gateway builds it';
}

interface Protocol {
  _packetRW: {
    write: { allocStart: number; alloc(length: number): Buffer; finalize(packet: Buffer): Buffer };
  };
  openssh_authAgent(channel: number, initialWindow: number, maxPacket: number): void;
}

interface ConnectionInternals {
  _sock?: { destroy(): void };
  _protocol: Protocol;
  _chanMgr: { add(callback: unknown): number };
}

const internals = (connection: Connection) => connection as unknown as ConnectionInternals;

/** Sends SSH_MSG_USERAUTH_BANNER: OpenSSH prints it on stderr, the only way to say why a login is refused. */
export function sendAuthBanner(connection: Connection, text: string): void {
  const protocol = internals(connection)._protocol;
  const message = Buffer.from(`${text.trimEnd().replace(/\r?\n/g, '\r\n')}\r\n`, 'utf8');
  const writer = protocol._packetRW.write;
  let at = writer.allocStart;
  const packet = writer.alloc(1 + 4 + message.length + 4);
  packet[at++] = USERAUTH_BANNER;
  packet.writeUInt32BE(message.length, at);
  message.copy(packet, at + 4);
  packet.writeUInt32BE(0, at + 4 + message.length); // empty language tag
  sendPacket(protocol, writer.finalize(packet));
}

/** Opens an `auth-agent@openssh.com` channel to the client (which must have asked for agent forwarding). */
export function openAgentChannel(connection: Connection): Promise<ServerChannel> {
  const { _protocol, _chanMgr } = internals(connection);
  return new Promise((resolve, reject) => {
    // ssh2 calls this back from its CHANNEL_OPEN_CONFIRMATION/FAILURE handlers, as for forwardOut().
    const callback = (error: Error | undefined, channel: ServerChannel) =>
      error ? reject(error) : resolve(channel);
    (callback as unknown as { type: string }).type = 'auth-agent@openssh.com';
    const id = _chanMgr.add(callback);
    if (id === -1) return reject(new Error('no free channels'));
    _protocol.openssh_authAgent(id, MAX_WINDOW, PACKET_SIZE);
  });
}

/** The TCP socket under a server-side connection (null once ssh2 has let go of it). */
export function socketOf(connection: Connection): Socket | null {
  return (internals(connection)._sock as Socket | undefined) ?? null;
}

/**
 * Drops a client's TCP connection. `end()` sends SSH_MSG_DISCONNECT and half-closes, which leaves the connection
 * (and its session) open for as long as the client does not close its side.
 */
export function destroyConnection(connection: Connection): void {
  internals(connection)._sock?.destroy();
}

interface SessionRequests {
  pty(
    id: number,
    rows: number,
    cols: number,
    height: number,
    width: number,
    term: string,
    modes: unknown,
    wantReply: boolean,
  ): void;
  env(id: number, key: string, value: string, wantReply: boolean): void;
  openssh_agentForward(id: number, wantReply: boolean): void;
  shell(id: number, wantReply: boolean): void;
  exec(id: number, command: string, wantReply: boolean): void;
  subsystem(id: number, name: string, wantReply: boolean): void;
}

interface ClientInternals {
  _protocol: SessionRequests & { session(id: number, window: number, packetSize: number): void };
  _chanMgr: { add(callback: unknown): number };
  _agentFwdEnabled?: boolean;
}

interface ChannelInternals {
  outgoing: { id: number; state: string };
  subtype?: string;
  /** Called in order with each CHANNEL_SUCCESS (false) or CHANNEL_FAILURE (true). */
  _callbacks: ((failed: boolean) => void)[];
}

/** Opens a session channel on a client connection, before it is known what it will run. */
export function openSessionChannel(client: Client): Promise<ClientChannel> {
  const { _protocol, _chanMgr } = client as unknown as ClientInternals;
  return new Promise((resolve, reject) => {
    // Called back from ssh2's CHANNEL_OPEN_CONFIRMATION/FAILURE handlers, as for exec() and shell().
    const callback = (error: Error | undefined, channel: ClientChannel) =>
      error ? reject(error) : resolve(channel);
    (callback as unknown as { type: string }).type = 'session';
    const id = _chanMgr.add(callback);
    if (id === -1) return reject(new Error('no free channels'));
    _protocol.session(id, MAX_WINDOW, PACKET_SIZE);
  });
}

export type SessionStart =
  | { kind: 'shell' }
  | { kind: 'exec'; command: string }
  | { kind: 'subsystem'; name: string };

/**
 * Sends a session channel's preparation (agent forwarding, environment, PTY) and then what it starts, all at once
 * as OpenSSH does rather than one round trip each as ssh2's exec() and shell() do. `done` is called from ssh2's
 * handler of the start's reply, as exec() calls back, so that what the workspace sends right behind that reply
 * (output, exit status, close) finds its listeners; with an error (ssh2's messages) if any request was refused.
 */
export function startSession(
  client: Client,
  channel: ClientChannel,
  preparation: { pty: PseudoTtyInfo | null; env: Record<string, string>; agent: boolean },
  start: SessionStart,
  done: (error?: Error) => void,
): void {
  const internals = client as unknown as ClientInternals;
  const protocol = internals._protocol;
  const chan = channel as unknown as ChannelInternals;
  const id = chan.outgoing.id;
  if (chan.outgoing.state !== 'open') {
    done(new Error('Channel is not open'));
    return;
  }
  // Replies come in the order of the requests: by the start's, every earlier one is known.
  let refused: Error | null = null;
  // One agent forwarding per connection, as ssh2 asks it: the workspace's sshd sets it up once for all sessions.
  if (preparation.agent && !internals._agentFwdEnabled) {
    internals._agentFwdEnabled = true;
    chan._callbacks.push((failed) => {
      if (failed) internals._agentFwdEnabled = false;
    });
    protocol.openssh_agentForward(id, true);
  }
  for (const [key, value] of Object.entries(preparation.env)) protocol.env(id, key, value, false);
  const { pty } = preparation;
  if (pty) {
    chan._callbacks.push((failed) => {
      if (failed) refused ??= new Error('Unable to request a pseudo-terminal');
    });
    protocol.pty(id, pty.rows, pty.cols, pty.height, pty.width, pty.term, pty.modes, true);
  }
  chan._callbacks.push((failed) => {
    if (failed) refused ??= new Error(startRefusal(start));
    if (refused) return done(refused);
    chan.subtype = start.kind;
    done();
  });
  if (start.kind === 'shell') protocol.shell(id, true);
  else if (start.kind === 'exec') protocol.exec(id, start.command, true);
  else protocol.subsystem(id, start.name, true);
}

const startRefusal = (start: SessionStart) =>
  start.kind === 'shell'
    ? 'Unable to open shell'
    : start.kind === 'exec'
      ? 'Unable to exec'
      : `Unable to start subsystem: ${start.name}`;

interface Cipher {
  allocPacket(payloadLength: number): Buffer;
  encrypt(packet: Buffer): void;
  _onWrite(packet: Buffer): void;
}

/** ssh2's AEAD ciphers with its native binding, by class: the block size its padding rounds to. */
const AEAD_BLOCK_BYTES: Record<string, number> = { AESGCMCipherBinding: 16, ChaChaPolyCipherBinding: 8 };
const AEAD_TAG_BYTES = 16;
/** A full channel data packet (PACKET_SIZE of data) with its headers, padding and tag fits. */
const REUSED_PACKET_BYTES = PACKET_SIZE + 256;
/** Below this a packet comes from Node's shared buffer pool (Buffer.allocUnsafe) and costs nothing to collect. */
const REUSE_FROM_BYTES = 4096;
/** Random bytes drawn at once for the packets' padding. */
const PADDING_POOL_BYTES = 64 * 1024;

/**
 * Random padding for packets, from a pool filled by the CSPRNG 64 KiB at a time, each byte handed out once (as
 * OpenSSH's arc4random_buf buffers its keystream). One randomFillSync per packet cost about 4 µs of call overhead
 * for 4–19 bytes: some 5 % of the proxy's CPU per GiB relayed, and 15 µs of each keystroke's four packets.
 */
export class PaddingPool {
  private readonly pool = Buffer.allocUnsafeSlow(PADDING_POOL_BYTES);
  private used = PADDING_POOL_BYTES;

  fill(target: Buffer, offset: number, length: number): void {
    if (this.used + length > this.pool.length) {
      randomFillSync(this.pool);
      this.used = 0;
    }
    this.pool.copy(target, offset, this.used, this.used + length);
    this.used += length;
  }
}

const padding = new PaddingPool();

/**
 * Lets a connection's packets take their padding from a pool of random bytes rather than a CSPRNG call each,
 * and its encrypted bulk packets reuse one buffer instead of a new one each. ssh2 allocates every outgoing packet
 * afresh; relaying a transfer, that is 32 KiB of memory outside the JavaScript heap per packet, which V8 collects
 * only in full garbage collections, dozens per GiB. The buffer is taken again only when the socket wrote the
 * packet to the kernel at once (nothing queued in the socket holds it); otherwise that packet keeps it and the
 * next one gets a new buffer. Other ciphers than the AEAD ones, and a stream that is not a socket, are left as
 * they are.
 */
export function reusePacketBuffers(peer: Connection | Client, socket: unknown): void {
  if (!(socket instanceof net.Socket)) return;
  const protocol = (peer as unknown as { _protocol?: { _cipher: Cipher } })._protocol;
  if (!protocol) return;
  let current = protocol._cipher;
  // ssh2 makes a new cipher after every key exchange.
  Object.defineProperty(protocol, '_cipher', {
    configurable: true,
    enumerable: true,
    get: () => current,
    set: (cipher: Cipher) => {
      current = cipher;
      reuseFor(cipher, socket);
    },
  });
  reuseFor(current, socket);
}

function reuseFor(cipher: Cipher, socket: Socket): void {
  const block = AEAD_BLOCK_BYTES[cipher.constructor.name];
  if (!block) return;
  const write = cipher._onWrite;
  // The buffer of the last packet, once the socket let go of it. Held weakly: an idle connection's goes at the
  // next full garbage collection, where a transfer's is in use again by then.
  let reusable: WeakRef<ArrayBuffer> | null = null;
  let lent: ArrayBuffer | null = null;
  // Laid out as ssh2 lays its AEAD packets out (RFC 4253 6): length, padding length, payload, at least 4 bytes of
  // padding to a multiple of the block size (for these ciphers the length field is outside it), then the tag.
  cipher.allocPacket = (payloadLength) => {
    let length = 4 + 1 + payloadLength;
    let paddingLength = block - ((length - 4) % block);
    if (paddingLength < 4) paddingLength += block;
    length += paddingLength;
    let packet: Buffer;
    if (length < REUSE_FROM_BYTES || length + AEAD_TAG_BYTES > REUSED_PACKET_BYTES) {
      packet = Buffer.allocUnsafe(length + AEAD_TAG_BYTES);
    } else {
      lent = reusable?.deref() ?? new ArrayBuffer(REUSED_PACKET_BYTES);
      reusable = null;
      packet = Buffer.from(lent, 0, length + AEAD_TAG_BYTES);
    }
    packet.writeUInt32BE(length - 4, 0);
    packet[4] = paddingLength;
    padding.fill(packet, 5 + payloadLength, paddingLength);
    return packet;
  };
  cipher._onWrite = (packet) => {
    write(packet);
    if (packet.buffer !== lent) return;
    // Nothing queued in the socket: the packet went to the kernel at once (or nowhere, the socket being closed).
    if (socket.writableLength === 0) reusable = new WeakRef(lent);
    lent = null;
  };
}
