import type WebSocket from 'ws';
import { vncAuthResponse } from './vnc-auth.js';

const VERSION = 'RFB 003.008\n';
const SECURITY_NONE = 1;
const SECURITY_VNC_AUTH = 2;

export class RfbHandshakeError extends Error {}

/** A WebSocket's messages as one byte stream, for the handshake's fixed-size reads. */
/** A WebSocket's messages as one byte stream: `read(n)` resolves with the next n bytes. */
export class MessageBytes {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private waiting: { size: number; resolve: (data: Buffer) => void; reject: (error: Error) => void } | null =
    null;
  private failure: Error | null = null;
  private readonly onMessage = (data: Buffer) => {
    this.chunks.push(data);
    this.buffered += data.length;
    this.settle();
  };
  private readonly onClose = () => this.fail(new RfbHandshakeError(`the ${this.side} closed the stream`));

  constructor(
    private readonly socket: WebSocket,
    private readonly side: string,
  ) {
    socket.on('message', this.onMessage);
    socket.on('close', this.onClose);
  }

  read(size: number): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      this.waiting = { size, resolve, reject };
      this.settle();
    });
  }

  fail(error: Error): void {
    this.failure ??= error;
    this.settle();
  }

  /** Stops listening; what arrived beyond the reads belongs to the stream that follows. */
  detach(): Buffer {
    this.socket.off('message', this.onMessage);
    this.socket.off('close', this.onClose);
    return Buffer.concat(this.chunks);
  }

  private settle(): void {
    const waiting = this.waiting;
    if (!waiting) return;
    if (this.buffered >= waiting.size) {
      this.waiting = null;
      const joined = Buffer.concat(this.chunks);
      this.chunks = joined.length > waiting.size ? [joined.subarray(waiting.size)] : [];
      this.buffered -= waiting.size;
      waiting.resolve(joined.subarray(0, waiting.size));
    } else if (this.failure) {
      this.waiting = null;
      waiting.reject(this.failure);
    }
  }
}

/**
 * Joins a browser's stream to a desktop's: the gateway is the RFB client of the desktop, answering its VNC
 * authentication with the host's password, and the RFB server of the browser, offering it no security (it was
 * authenticated by the gateway). Both sides speak RFB 3.8 (TigerVNC and noVNC do). Resolves, once both sides are
 * past security, with the bytes each side already sent beyond it; the stream continues from there unchanged.
 */
export async function joinRfb(
  browser: WebSocket,
  desktop: WebSocket,
  password: string,
  timeoutMs = 10_000,
): Promise<{ fromBrowser: Buffer; fromDesktop: Buffer; passwordProtected: boolean }> {
  const fromDesktop = new MessageBytes(desktop, 'desktop');
  const fromBrowser = new MessageBytes(browser, 'browser');
  const timer = setTimeout(() => {
    const error = new RfbHandshakeError(`the RFB handshake took longer than ${timeoutMs / 1000} s`);
    fromDesktop.fail(error);
    fromBrowser.fail(error);
  }, timeoutMs);
  let passwordProtected: boolean;
  try {
    passwordProtected = await authenticateToDesktop(fromDesktop, desktop, password);
    await offerNoSecurity(fromBrowser, browser);
  } catch (error) {
    fromDesktop.detach();
    fromBrowser.detach();
    throw error;
  } finally {
    clearTimeout(timer);
  }
  return { fromBrowser: fromBrowser.detach(), fromDesktop: fromDesktop.detach(), passwordProtected };
}

/** Whether the desktop asked for its password (an image from before desktop passwords asks for none). */
async function authenticateToDesktop(
  bytes: MessageBytes,
  desktop: WebSocket,
  password: string,
): Promise<boolean> {
  const version = (await bytes.read(12)).toString('latin1');
  const match = /^RFB (\d{3})\.(\d{3})\n$/.exec(version);
  if (!match || Number(match[1]) !== 3 || Number(match[2]) < 8)
    throw new RfbHandshakeError(`the desktop does not speak RFB 3.8 (${JSON.stringify(version)})`);
  desktop.send(Buffer.from(VERSION, 'latin1'));
  const count = (await bytes.read(1))[0]!;
  if (count === 0) throw new RfbHandshakeError(`the desktop refused: ${await reason(bytes)}`);
  const types = await bytes.read(count);
  // An image from before the desktop had a password offers None; VNC authentication is preferred whenever offered.
  if (types.includes(SECURITY_VNC_AUTH)) {
    desktop.send(Buffer.from([SECURITY_VNC_AUTH]));
    desktop.send(vncAuthResponse(password, await bytes.read(16)));
  } else if (types.includes(SECURITY_NONE)) {
    desktop.send(Buffer.from([SECURITY_NONE]));
  } else {
    throw new RfbHandshakeError(`the desktop offers no security type the gateway speaks (${[...types]})`);
  }
  if ((await bytes.read(4)).readUInt32BE(0) !== 0)
    throw new RfbHandshakeError(`the desktop refused the gateway: ${await reason(bytes)}`);
  return types.includes(SECURITY_VNC_AUTH);
}

async function offerNoSecurity(bytes: MessageBytes, browser: WebSocket) {
  browser.send(Buffer.from(VERSION, 'latin1'));
  const version = (await bytes.read(12)).toString('latin1');
  if (version !== VERSION)
    throw new RfbHandshakeError(`the browser does not speak RFB 3.8 (${JSON.stringify(version)})`);
  browser.send(Buffer.from([1, SECURITY_NONE]));
  const chosen = (await bytes.read(1))[0];
  if (chosen !== SECURITY_NONE) throw new RfbHandshakeError(`the browser chose security type ${chosen}`);
  browser.send(Buffer.alloc(4));
}

/** RFB 3.8's failure reason: a length, then text. */
async function reason(bytes: MessageBytes): Promise<string> {
  const length = (await bytes.read(4)).readUInt32BE(0);
  return (await bytes.read(Math.min(length, 1024))).toString('utf8');
}
