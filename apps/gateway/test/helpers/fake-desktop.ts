import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';

/** A stand-in for a workspace's websockify: serves one page, greets every stream with an RFB banner and echoes it. */
export class FakeDesktop {
  readonly requests: { url: string; headers: IncomingHttpHeaders }[] = [];
  readonly upgrades: IncomingHttpHeaders[] = [];
  readonly streams: WebSocket[] = [];
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

  constructor() {
    this.wss.on('connection', (socket, request) => {
      this.upgrades.push(request.headers);
      this.streams.push(socket);
      socket.send(Buffer.from('RFB 003.008\n'));
      socket.on('message', (data: Buffer) => socket.send(data));
    });
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

/** Opens a stream through the gateway; resolves with the socket and its first message, or the refusal. */
export function openStream(
  url: string,
  headers: Record<string, string>,
): Promise<{ socket: WebSocket; banner: string } | { status: number }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, ['binary'], { headers });
    socket.once('unexpected-response', (_request, response) => resolve({ status: response.statusCode ?? 0 }));
    socket.once('message', (data: Buffer) => resolve({ socket, banner: data.toString('latin1') }));
    socket.once('error', reject);
  });
}
