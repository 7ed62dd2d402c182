// A minimal RFB 3.8 client over a WebSocket (what noVNC speaks through websockify): security type None (what
// the gateway's proxy offers) or VNC authentication (what the desktop itself asks for), raw encoding, and
// framebuffer update requests. Enough to time full-screen transfers and small round trips.
import WebSocket from 'ws';
import { vncAuthResponse } from '../../apps/gateway/dist/vnc/vnc-auth.js';

/** Bytes of a WebSocket as one stream: `read(n)` resolves with exactly n bytes, in order; `skip(n)` drops n
 * bytes as they arrive, without copying (pixel data). */
class ByteReader {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private waiting: { size: number; skip: boolean; resolve: (data: Buffer) => void } | null = null;
  private failure: Error | null = null;

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    this.settle();
  }

  fail(error: Error): void {
    this.failure = error;
    this.settle();
  }

  read(size: number): Promise<Buffer> {
    return this.wait(size, false);
  }

  async skip(size: number): Promise<void> {
    await this.wait(size, true);
  }

  private wait(size: number, skip: boolean): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      this.waiting = { size, skip, resolve };
      this.settle();
      if (this.waiting && this.failure) reject(this.failure);
    });
  }

  private settle(): void {
    const waiting = this.waiting;
    if (!waiting) return;
    if (waiting.skip) {
      // Drop what is there now; the rest as it comes.
      while (waiting.size > 0 && this.chunks.length > 0) {
        const first = this.chunks[0]!;
        const take = Math.min(first.length, waiting.size);
        waiting.size -= take;
        this.buffered -= take;
        if (take === first.length) this.chunks.shift();
        else this.chunks[0] = first.subarray(take);
      }
      if (waiting.size === 0) {
        this.waiting = null;
        waiting.resolve(Buffer.alloc(0));
      }
      return;
    }
    if (this.buffered < waiting.size) return;
    this.waiting = null;
    const first = this.chunks[0]!;
    const joined = first.length >= waiting.size ? first : Buffer.concat(this.chunks);
    const rest = joined.subarray(waiting.size);
    if (joined === first) this.chunks[0] = rest;
    else this.chunks = [rest];
    if (this.chunks[0]!.length === 0) this.chunks.shift();
    this.buffered -= waiting.size;
    waiting.resolve(joined.subarray(0, waiting.size));
  }
}

export interface RfbSession {
  width: number;
  height: number;
  bytesPerPixel: number;
  /** Requests a region (non-incremental, raw) and waits for its update; returns the bytes received. */
  update(x: number, y: number, width: number, height: number): Promise<number>;
  close(): void;
}

/** `password` answers a desktop that asks for VNC authentication (the direct path). */
export async function openRfb(
  url: string,
  headers: Record<string, string>,
  password?: string,
): Promise<RfbSession> {
  const socket = new WebSocket(url, ['binary'], { headers, perMessageDeflate: false, maxPayload: 2 ** 28 });
  const reader = new ByteReader();
  socket.on('message', (data: Buffer) => reader.push(data));
  socket.on('close', () => reader.fail(new Error('the stream closed')));
  await new Promise<void>((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('error', reject);
    socket.once('unexpected-response', (_request, response) =>
      reject(new Error(`${url}: HTTP ${response.statusCode}`)),
    );
  });
  const version = (await reader.read(12)).toString('latin1');
  if (!version.startsWith('RFB 003.')) throw new Error(`not an RFB server: ${JSON.stringify(version)}`);
  socket.send(Buffer.from('RFB 003.008\n'));
  const count = (await reader.read(1))[0]!;
  const types = await reader.read(count);
  if (password !== undefined && types.includes(2)) {
    socket.send(Buffer.from([2]));
    socket.send(vncAuthResponse(password, await reader.read(16)));
  } else if (types.includes(1)) {
    socket.send(Buffer.from([1]));
  } else {
    throw new Error(`the server offers no security type this client can use: ${[...types]}`);
  }
  if ((await reader.read(4)).readUInt32BE(0) !== 0) throw new Error('security handshake failed');
  socket.send(Buffer.from([1])); // ClientInit: shared
  const init = await reader.read(24);
  const width = init.readUInt16BE(0);
  const height = init.readUInt16BE(2);
  const bytesPerPixel = init[4]! / 8;
  await reader.read(init.readUInt32BE(20)); // the desktop's name
  // SetEncodings: raw only, so every update is exactly width × height × bytes per pixel.
  const encodings = Buffer.alloc(8);
  encodings.writeUInt8(2, 0);
  encodings.writeUInt16BE(1, 2);
  encodings.writeInt32BE(0, 4);
  socket.send(encodings);

  return {
    width,
    height,
    bytesPerPixel,
    async update(x, y, w, h) {
      const request = Buffer.alloc(10);
      request.writeUInt8(3, 0);
      request.writeUInt8(0, 1);
      request.writeUInt16BE(x, 2);
      request.writeUInt16BE(y, 4);
      request.writeUInt16BE(w, 6);
      request.writeUInt16BE(h, 8);
      socket.send(request);
      let received = 0;
      for (;;) {
        const type = (await reader.read(1))[0]!;
        if (type === 0) break;
        if (type === 2) continue; // Bell
        if (type === 3) {
          const header = await reader.read(7);
          await reader.skip(header.readUInt32BE(3));
          continue;
        }
        throw new Error(`unexpected RFB message ${type}`);
      }
      const rects = (await reader.read(3)).readUInt16BE(1);
      received += 4;
      for (let i = 0; i < rects; i++) {
        const rect = await reader.read(12);
        const size = rect.readUInt16BE(4) * rect.readUInt16BE(6) * bytesPerPixel;
        await reader.skip(size);
        received += 12 + size;
      }
      return received;
    },
    close() {
      socket.close();
    },
  };
}
