import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import type { Connection, ServerChannel } from 'ssh2';

// ssh2 1.17 has no public way for a server to send a banner after the first one, to open an agent channel
// towards its client, or to drop a client's connection outright, although its internals can do all three. These
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
