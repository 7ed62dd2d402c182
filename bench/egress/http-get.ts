// One HTTP/1.1 GET on a fresh connection, made either directly or through a loopback SOCKS5 proxy (a v2ray
// inbound). Both paths run the very same code, so their figures differ only by the tunnel; the body is counted,
// not kept, so a download of hundreds of megabytes costs no memory.
import net from 'node:net';
import { performance } from 'node:perf_hooks';

export interface GetResult {
  /** From the first connect to the last body byte. */
  ms: number;
  bytes: number;
  /** The first few hundred bytes of the body (the probe's IP echo fits). */
  head: string;
}

const IDLE_TIMEOUT_MS = 10_000;

/** Reads from a socket in exact amounts while a handshake runs; `rest()` hands over what came early. */
function reader(socket: net.Socket) {
  let pending = Buffer.alloc(0);
  let wake: (() => void) | null = null;
  let failure: Error | null = null;
  const onData = (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    wake?.();
  };
  const onEnd = () => {
    failure ??= new Error('the proxy closed the connection during the handshake');
    wake?.();
  };
  socket.on('data', onData);
  socket.on('close', onEnd);
  return {
    async read(n: number): Promise<Buffer> {
      while (pending.length < n) {
        if (failure) throw failure;
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = null;
      }
      const out = pending.subarray(0, n);
      pending = pending.subarray(n);
      return out;
    },
    /** Stops reading (the socket stays paused until its next reader resumes it) and returns what is left. */
    rest(): Buffer {
      socket.pause();
      socket.off('data', onData);
      socket.off('close', onEnd);
      return pending;
    },
  };
}

/** A connection to `host:port` (an IPv4 literal), through SOCKS5 without authentication when a port is given. */
async function open(host: string, port: number, socksPort: number | null): Promise<net.Socket> {
  const socket = net.connect(socksPort ?? port, socksPort === null ? host : '127.0.0.1');
  socket.setNoDelay(true);
  socket.setTimeout(IDLE_TIMEOUT_MS, () => socket.destroy(new Error('timeout')));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  if (socksPort === null) return socket;
  try {
    const input = reader(socket);
    socket.write(Buffer.from([5, 1, 0]));
    const [version, method] = await input.read(2);
    if (version !== 5 || method !== 0) throw new Error(`SOCKS: no usable method (${version}, ${method})`);
    const address = Buffer.from([1, ...host.split('.').map(Number)]);
    socket.write(Buffer.concat([Buffer.from([5, 1, 0]), address, Buffer.from([port >> 8, port & 0xff])]));
    const reply = await input.read(4);
    if (reply[1] !== 0) throw new Error(`SOCKS: CONNECT refused (reply ${reply[1]})`);
    // The bound address (IPv4, IPv6 or a name) and port, which nothing here needs.
    const bound = reply[3] === 1 ? 4 : reply[3] === 4 ? 16 : (await input.read(1))[0]!;
    await input.read(bound + 2);
    const early = input.rest();
    if (early.length > 0) socket.unshift(early);
    return socket;
  } catch (error) {
    socket.destroy();
    throw error;
  }
}

/** GET `url` (http, IPv4 literal) with `Connection: close`; resolves when Content-Length bytes have arrived. */
export async function get(url: URL, socksPort: number | null): Promise<GetResult> {
  const started = performance.now();
  const port = Number(url.port || 80);
  const socket = await open(url.hostname, port, socksPort);
  return new Promise<GetResult>((resolve, reject) => {
    let header = Buffer.alloc(0);
    let length = -1;
    let bytes = 0;
    let head = '';
    const finish = (error: Error | null) => {
      socket.destroy();
      if (error) reject(error);
      else resolve({ ms: performance.now() - started, bytes, head });
    };
    const body = (chunk: Buffer) => {
      if (head.length < 512) head += chunk.subarray(0, 512 - head.length).toString('latin1');
      bytes += chunk.length;
      if (bytes >= length) finish(null);
    };
    socket.on('data', (chunk: Buffer) => {
      if (length >= 0) return body(chunk);
      header = Buffer.concat([header, chunk]);
      const end = header.indexOf('\r\n\r\n');
      if (end < 0) return;
      const text = header.subarray(0, end).toString('latin1');
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1];
      const declared = /\r\ncontent-length:\s*(\d+)/i.exec(text)?.[1];
      if (status !== '200' || declared === undefined)
        return finish(
          new Error(`GET ${url}: ${text.split('\r\n')[0]} (Content-Length ${declared ?? 'none'})`),
        );
      length = Number(declared);
      const rest = header.subarray(end + 4);
      if (rest.length > 0 || length === 0) body(rest);
    });
    socket.on('error', (error) => finish(error));
    socket.on('close', () => finish(new Error(`GET ${url}: closed after ${bytes} of ${length} body bytes`)));
    socket.resume();
    socket.write(`GET ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nConnection: close\r\n\r\n`);
  });
}
