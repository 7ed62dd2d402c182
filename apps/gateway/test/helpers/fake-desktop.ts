import { randomBytes } from 'node:crypto';
import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';
import { MessageBytes } from '../../src/vnc/rfb-handshake.js';
import { vncAuthResponse } from '../../src/vnc/vnc-auth.js';

const VERSION = Buffer.from('RFB 003.008\n', 'latin1');

/**
 * A stand-in for a workspace's websockify in front of a VNC server that asks for a password (as TigerVNC with
 * `-SecurityTypes VncAuth` does): serves one page; on a stream it asks for VNC authentication, accepts any of
 * `passwords()`, and from then on echoes every message.
 */
export class FakeDesktop {
  readonly requests: { url: string; headers: IncomingHttpHeaders }[] = [];
  readonly upgrades: IncomingHttpHeaders[] = [];
  /** Streams past authentication. */
  readonly streams: WebSocket[] = [];
  /** Authentication attempts that failed. */
  refused = 0;
  /** Offer no security at all, as a workspace image from before desktop passwords does. */
  withoutPassword = false;
  private readonly server = http.createServer((request, response) => {
    this.requests.push({ url: request.url ?? '', headers: request.headers });
    if (request.url === '/vnc.html') {
      response.writeHead(200, { 'content-type': 'text/html', 'x-internal': 'secret' });
      response.end('<title>noVNC</title>');
    } else {
      response.writeHead(404).end();
    }
  });
  private readonly wss = new WebSocketServer({ server: this.server });

  constructor(private readonly passwords: () => string[]) {
    this.wss.on('connection', (socket, request) => {
      this.upgrades.push(request.headers);
      this.authenticate(socket).catch(() => socket.terminate());
    });
  }

  private async authenticate(socket: WebSocket): Promise<void> {
    const bytes = new MessageBytes(socket, 'gateway');
    socket.send(VERSION);
    await bytes.read(12);
    if (this.withoutPassword) {
      socket.send(Buffer.from([1, 1]));
      if ((await bytes.read(1))[0] !== 1) throw new Error('not security type None');
      return this.accept(socket, bytes);
    }
    socket.send(Buffer.from([1, 2]));
    if ((await bytes.read(1))[0] !== 2) throw new Error('no VNC authentication');
    const challenge = randomBytes(16);
    socket.send(challenge);
    const response = await bytes.read(16);
    if (!this.passwords().some((password) => vncAuthResponse(password, challenge).equals(response))) {
      this.refused += 1;
      const reason = Buffer.from('Authentication failure');
      const failure = Buffer.alloc(8);
      failure.writeUInt32BE(1, 0);
      failure.writeUInt32BE(reason.length, 4);
      socket.send(Buffer.concat([failure, reason]));
      socket.close();
      return;
    }
    this.accept(socket, bytes);
  }

  private accept(socket: WebSocket, bytes: MessageBytes): void {
    socket.send(Buffer.alloc(4));
    const early = bytes.detach();
    this.streams.push(socket);
    if (early.length > 0) socket.send(early);
    socket.on('message', (data: Buffer) => socket.send(data));
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return (this.server.address() as AddressInfo).port;
  }

  close(): void {
    for (const socket of this.streams) socket.terminate();
    this.wss.close();
    this.server.close();
  }
}

/**
 * Opens a stream through the gateway as a browser's RFB client does, up to the end of security (which the
 * gateway answers with none); resolves with the socket and the version it greeted with, or the refusal.
 */
export function openStream(
  url: string,
  headers: Record<string, string>,
): Promise<{ socket: WebSocket; banner: string } | { status: number } | { closed: number; reason: string }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, ['binary'], { headers });
    socket.once('unexpected-response', (_request, response) => resolve({ status: response.statusCode ?? 0 }));
    socket.once('error', reject);
    socket.once('close', (code, reason) => resolve({ closed: code, reason: reason.toString() }));
    socket.once('open', () => {
      const bytes = new MessageBytes(socket, 'gateway');
      void (async () => {
        const banner = (await bytes.read(12)).toString('latin1');
        socket.send(VERSION);
        const count = (await bytes.read(1))[0]!;
        const types = [...(await bytes.read(count))];
        if (types.join() !== '1') throw new Error(`the gateway offered security types ${types}`);
        socket.send(Buffer.from([1]));
        const result = (await bytes.read(4)).readUInt32BE(0);
        if (result !== 0) throw new Error(`security result ${result}`);
        bytes.detach();
        socket.removeAllListeners('close');
        resolve({ socket, banner });
      })().catch(reject);
    });
  });
}
