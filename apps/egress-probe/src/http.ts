import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { pipeline, Readable } from 'node:stream';
import { answerQuery, type DnsZone } from './dns.js';
import { type DnsLog, normaliseAddress } from './dns-log.js';

/** What the handler needs from a request; Node's HTTP/1.1 and HTTP/2 compatibility objects both fit. */
export interface ProbeRequest extends Readable {
  method?: string | undefined;
  url?: string | undefined;
  headers: IncomingHttpHeaders;
  socket: { remoteAddress?: string | undefined };
}

export interface ProbeResponse extends NodeJS.WritableStream {
  headersSent: boolean;
  writeHead(status: number, headers: OutgoingHttpHeaders): unknown;
  destroy(): unknown;
}

export interface HandlerOptions {
  zone: DnsZone;
  log: DnsLog;
  logToken: string | undefined;
  maxBytes: number;
}

const DNS_MESSAGE = 'application/dns-message';
const MAX_DNS_MESSAGE = 65_535;
const ZEROES = Buffer.alloc(64 * 1024);

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export function createHandler(options: HandlerOptions) {
  return (req: ProbeRequest, res: ProbeResponse): void => {
    handle(req, res, options).catch((error: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      const status = error instanceof HttpError ? error.status : 500;
      const message = error instanceof HttpError ? error.message : 'internal error';
      send(res, status, 'text/plain; charset=utf-8', `${message}\n`);
    });
  };
}

function send(res: ProbeResponse, status: number, type: string, body: string | Buffer, head = false): void {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  // Content-Length on every answer: tunnels propagate half-close slowly, so clients must not wait for EOF.
  res.writeHead(status, {
    'content-type': type,
    'content-length': bytes.length,
    'cache-control': 'no-store',
  });
  if (head) res.end();
  else res.end(bytes);
}

async function handle(req: ProbeRequest, res: ProbeResponse, options: HandlerOptions): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://probe.invalid');
  const method = req.method ?? 'GET';
  const head = method === 'HEAD';
  const caller = normaliseAddress(req.socket.remoteAddress);

  if (url.pathname === '/dns-query') {
    await serveDoh(req, res, url, caller, options);
    return;
  }
  if (method !== 'GET' && !head) throw new HttpError(405, 'method not allowed');

  if (url.pathname === '/' || url.pathname === '/ip') {
    send(res, 200, 'text/plain; charset=utf-8', caller, head);
  } else if (url.pathname === '/ip.json') {
    send(res, 200, 'application/json', JSON.stringify({ ip: caller }), head);
  } else if (url.pathname.startsWith('/bytes/')) {
    serveBytes(res, url.pathname.slice('/bytes/'.length), options.maxBytes, head);
  } else if (url.pathname === '/dns-log') {
    authorise(req, url, options.logToken);
    const name = url.searchParams.get('name');
    if (!name) throw new HttpError(400, 'the name parameter is required');
    const body = JSON.stringify({ name, queries: options.log.lookup(name) });
    send(res, 200, 'application/json', body, head);
  } else {
    throw new HttpError(404, 'not found');
  }
}

function serveBytes(res: ProbeResponse, count: string, maxBytes: number, head: boolean): void {
  const total = Number(count);
  if (!/^\d+$/.test(count) || !Number.isSafeInteger(total)) throw new HttpError(400, 'expected /bytes/<n>');
  if (total > maxBytes) throw new HttpError(413, `at most ${maxBytes} bytes`);
  res.writeHead(200, {
    'content-type': 'application/octet-stream',
    'content-length': total,
    'cache-control': 'no-store',
  });
  if (head) {
    res.end();
    return;
  }
  let left = total;
  const body = new Readable({
    read() {
      const size = Math.min(left, ZEROES.length);
      left -= size;
      this.push(size > 0 ? ZEROES.subarray(0, size) : null);
    },
  });
  // A client that stops reading midway only ends its own response.
  pipeline(body, res, () => undefined);
}

function authorise(req: ProbeRequest, url: URL, token: string | undefined): void {
  if (token === undefined) return;
  const header = req.headers.authorization;
  const given = header?.startsWith('Bearer ') ? header.slice(7) : url.searchParams.get('token');
  const digest = (value: string) => createHash('sha256').update(value).digest();
  if (given === null || given === undefined || !timingSafeEqual(digest(given), digest(token))) {
    throw new HttpError(401, 'a valid token is required');
  }
}

async function serveDoh(
  req: ProbeRequest,
  res: ProbeResponse,
  url: URL,
  caller: string,
  options: HandlerOptions,
): Promise<void> {
  let query: Buffer;
  if (req.method === 'GET') {
    const encoded = url.searchParams.get('dns');
    if (!encoded) throw new HttpError(400, 'the dns parameter is required');
    query = Buffer.from(encoded, 'base64url');
  } else if (req.method === 'POST') {
    if (req.headers['content-type']?.split(';')[0]?.trim() !== DNS_MESSAGE) {
      throw new HttpError(415, `expected ${DNS_MESSAGE}`);
    }
    query = await readBody(req, MAX_DNS_MESSAGE);
  } else {
    throw new HttpError(405, 'method not allowed');
  }
  const response = answerQuery(query, caller, 'doh', options.zone, options.log);
  if (!response) throw new HttpError(400, 'not a DNS query');
  send(res, 200, DNS_MESSAGE, response);
}

async function readBody(req: ProbeRequest, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of req) {
    length += (chunk as Buffer).length;
    if (length > limit) throw new HttpError(413, 'message too large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
