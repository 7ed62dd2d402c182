import http, {
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { type Duplex, type Readable, Transform } from 'node:stream';
import type { Logger } from 'pino';
import { DomainError, errors } from '../domain/errors.js';
import {
  type PortShares,
  SHARE_COOKIE_PREFIX,
  SHARE_ENTRY_PATH,
  type ShareVisit,
} from '../domain/shares/port-shares.js';
import type { ShareSettings } from '../domain/shares/settings.js';
import { BackgroundEvents } from '../events/background-events.js';
import type { EventBus } from '../events/event-bus.js';
import type { PortTunnels } from './port-tunnels.js';
import { privateSharePage } from './share-private-page.js';

export interface ShareProxyOptions {
  shares: PortShares;
  tunnels: PortTunnels;
  settings: ShareSettings;
  bus: EventBus;
  log: Logger;
  /** The address SHARE_PORTS listen on (HTTP_HOST). */
  bindHost: string;
  /** The user portal's address, where a visitor without a pass is sent to open the share. */
  portalUrl: string;
  /** How often open streams are checked against their share (revocation on another gateway, expiry). */
  recheckMs?: number;
}

/** A request or WebSocket relayed now, ended when its share is revoked or its pass runs out. */
interface LiveStream {
  visit: ShareVisit;
  end: (reason: string) => void;
}

type Where = { listenPort: number } | { label: string };

/** Request headers never passed to the workspace's app: hop-by-hop ones, and every credential of the gateway. */
const DROPPED_REQUEST_HEADERS = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);
const DROPPED_RESPONSE_HEADERS = new Set(['connection', 'keep-alive', 'transfer-encoding', 'set-cookie']);
/** The gateway's cookies all start so; an app may set none of them. */
const GATEWAY_COOKIE = /^\s*ccp_/i;

const STATUS: Record<string, number> = {
  invalid: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  rate_limited: 429,
  unavailable: 503,
};

/**
 * Serves shared ports of workspaces on origins of their own: each port of SHARE_PORTS is one share, and under
 * SHARE_DOMAIN each `<label>.<domain>` on the main listener is one. A visitor enters with a ticket or a link at
 * SHARE_ENTRY_PATH and gets a cookie named for that share alone; every request is checked against the share as
 * it is now and relayed (HTTP, and WebSocket upgrades for dev servers' hot reload) to the port inside the
 * workspace, without any of the gateway's credentials, at most SHARE_BYTES_PER_SECOND per share.
 */
export class ShareProxy {
  private readonly servers: Server[] = [];
  private readonly live = new Set<LiveStream>();
  private readonly budgets = new Map<string, ByteBudget>();
  private readonly events: BackgroundEvents;
  private readonly recheck: NodeJS.Timeout;

  constructor(private readonly options: ShareProxyOptions) {
    this.events = new BackgroundEvents(options.bus, options.log);
    options.bus.on('port_share.revoked', ({ data }) =>
      this.endWhere((s) => s.visit.share.id === data.share_id, 'revoked'),
    );
    options.bus.on('user.access_ended', ({ userId }) =>
      this.endWhere((s) => s.visit.host.ownerId === userId, 'owner_revoked'),
    );
    this.recheck = setInterval(() => void this.recheckStreams(), options.recheckMs ?? 2000);
    this.recheck.unref();
  }

  /** Open streams through shares, for /metrics. */
  streamCount(): number {
    return this.live.size;
  }

  /** Listens on every port of SHARE_PORTS (none without it). */
  async listen(): Promise<void> {
    const { ports } = this.options.settings;
    if (!ports) return;
    for (let port = ports.first; port <= ports.last; port++) {
      const server = http.createServer((request, response) =>
        this.serve(request, response, { listenPort: port }),
      );
      server.on('upgrade', (request: IncomingMessage, socket: Socket, head: Buffer) =>
        this.upgrade(request, socket, head, { listenPort: port }),
      );
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, this.options.bindHost, () => {
          server.off('error', reject);
          resolve();
        });
      });
      this.servers.push(server);
    }
  }

  /** The ports listened on (tests: SHARE_PORTS as bound). */
  ports(): number[] {
    return this.servers.map((server) => (server.address() as AddressInfo).port);
  }

  /**
   * Under SHARE_DOMAIN, takes the requests and upgrades addressed to a share's host name off the main listener
   * before the API sees them: nothing of the API, the dashboard or the desktop is served on a share's origin.
   */
  divert(server: Server): void {
    if (!this.options.settings.domain) return;
    const emit = server.emit.bind(server) as (event: string, ...args: unknown[]) => boolean;
    server.emit = ((event: string, ...args: unknown[]) => {
      if (event === 'request' || event === 'upgrade') {
        const label = this.labelOf(args[0] as IncomingMessage);
        if (label) {
          if (event === 'request')
            this.serve(args[0] as IncomingMessage, args[1] as ServerResponse, { label });
          else this.upgrade(args[0] as IncomingMessage, args[1] as Socket, args[2] as Buffer, { label });
          return true;
        }
      }
      return emit(event, ...args);
    }) as Server['emit'];
  }

  async close(): Promise<void> {
    clearInterval(this.recheck);
    this.endWhere(() => true, 'gateway_stopped');
    await Promise.all(
      this.servers.map(
        (server) =>
          new Promise<void>((resolve) => {
            server.closeAllConnections();
            server.close(() => resolve());
          }),
      ),
    );
    this.options.tunnels.close();
    await this.events.settled();
  }

  /** The share label a request's Host names under SHARE_DOMAIN, or null. */
  private labelOf(request: IncomingMessage): string | null {
    const domain = this.options.settings.domain;
    const host = (request.headers.host ?? '').toLowerCase().replace(/:\d+$/, '');
    if (!domain || !host.endsWith(`.${domain}`)) return null;
    const label = host.slice(0, -domain.length - 1);
    return /^[a-z0-9]{1,63}$/.test(label) ? label : null;
  }

  private serve(request: IncomingMessage, response: ServerResponse, where: Where): void {
    this.handle(request, response, where).catch((error: unknown) => {
      if (response.headersSent) return response.destroy();
      const { status, body } = refusal(error, this.options.log);
      response.writeHead(status, {
        'content-type': 'application/json; charset=utf-8',
        'cache-control': 'no-store',
      });
      response.end(body);
    });
  }

  private async handle(request: IncomingMessage, response: ServerResponse, where: Where): Promise<void> {
    const share = await this.options.shares.findServed(where);
    if (!share) throw errors.notFound('Share');
    const url = new URL(request.url ?? '/', 'http://share');
    const ticket = url.searchParams.get('ticket');
    const link = url.searchParams.get('link');
    const entering = url.pathname === SHARE_ENTRY_PATH && (ticket || link);
    const reading = request.method === 'GET' || request.method === 'HEAD';
    if (
      !entering &&
      reading &&
      !cookieValue(request.headers.cookie, `${SHARE_COOKIE_PREFIX}${share.label}`)
    ) {
      // A browser that came without a pass (no cookie, no ticket, no link) is told where the share opens.
      const page = privateSharePage(this.options.portalUrl);
      response.writeHead(401, page.headers);
      response.end(request.method === 'HEAD' ? undefined : page.body);
      return;
    }
    if (url.pathname === SHARE_ENTRY_PATH) {
      if (!ticket && !link) throw errors.unauthorized('A share ticket or link is required');
      const { pass, maxAgeSeconds } = await this.options.shares.enter(
        share,
        ticket ? { ticket } : { link: link! },
        request.socket.remoteAddress ?? '',
      );
      const secure = this.options.shares.originOf(share).startsWith('https:');
      response.writeHead(303, {
        location: '/',
        'set-cookie': `${SHARE_COOKIE_PREFIX}${share.label}=${pass}; Path=/; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`,
        'cache-control': 'no-store',
        'referrer-policy': 'no-referrer',
      });
      response.end();
      return;
    }
    const visit = await this.admit(request, share.label, share, false);
    const channel = await this.options.tunnels.open(
      await this.options.shares.workspaceLogin(visit),
      visit.share.port,
    );
    const stream: LiveStream = {
      visit,
      end: () => {
        channel.destroy();
        response.destroy();
      },
    };
    this.live.add(stream);
    response.once('close', () => {
      this.live.delete(stream);
      channel.destroy();
    });
    const budget = this.budgetOf(visit.share.id);
    const upstream = http.request({
      createConnection: () => asSocket(channel),
      method: request.method,
      path: request.url,
      headers: forwardedHeaders(request),
    });
    upstream.on('error', () => {
      if (!response.headersSent) {
        response.writeHead(502, { 'content-type': 'application/json; charset=utf-8' });
        response.end(
          JSON.stringify({ error: 'The app in the workspace did not answer', code: 'share_app_failed' }),
        );
      } else response.destroy();
    });
    upstream.on('response', (answer) => {
      response.writeHead(answer.statusCode ?? 502, answer.statusMessage, returnedHeaders(answer.headers));
      throttled(answer, budget).pipe(response);
    });
    throttled(request, budget).pipe(upstream);
  }

  private upgrade(request: IncomingMessage, socket: Socket, head: Buffer, where: Where): void {
    socket.on('error', () => socket.destroy());
    this.openUpgrade(request, socket, head, where).catch((error: unknown) => {
      const { status, body } = refusal(error, this.options.log);
      if (!socket.writable) return socket.destroy();
      socket.end(
        `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\n` +
          `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
    });
  }

  private async openUpgrade(
    request: IncomingMessage,
    socket: Socket,
    head: Buffer,
    where: Where,
  ): Promise<void> {
    const share = await this.options.shares.findServed(where);
    if (!share) throw errors.notFound('Share');
    const visit = await this.admit(request, share.label, share, true);
    const channel = await this.options.tunnels.open(
      await this.options.shares.workspaceLogin(visit),
      visit.share.port,
    );
    if (socket.destroyed) return void channel.destroy();
    const budget = this.budgetOf(visit.share.id);
    const traffic = { in: 0, out: 0 };
    const openedAt = Date.now();
    let reason = 'closed';
    const stream: LiveStream = {
      visit,
      end: (why) => {
        reason = why;
        socket.destroy();
        channel.destroy();
      },
    };
    const upstream = http.request({
      createConnection: () => asSocket(channel),
      method: request.method,
      path: request.url,
      headers: {
        ...forwardedHeaders(request),
        connection: 'Upgrade',
        upgrade: request.headers.upgrade ?? 'websocket',
      },
    });
    upstream.on('error', () => socket.destroy());
    upstream.on('response', (answer) => {
      // The app refused the upgrade: its answer goes back as it is, then the connection ends.
      socket.write(statusLine(answer, returnedHeaders(answer.headers)));
      answer.pipe(socket);
    });
    upstream.on('upgrade', (answer, appSocket: Duplex, appHead: Buffer) => {
      socket.write(
        statusLine(answer, {
          ...returnedHeaders(answer.headers),
          connection: 'Upgrade',
          upgrade: answer.headers.upgrade ?? 'websocket',
        }),
      );
      if (appHead.length > 0) socket.write(appHead);
      if (head.length > 0) appSocket.write(head);
      this.live.add(stream);
      const counted = (direction: 'in' | 'out') =>
        new Transform({
          transform(chunk: Buffer, _encoding, done) {
            traffic[direction] += chunk.length;
            done(null, chunk);
          },
        });
      throttled(socket, budget).pipe(counted('in')).pipe(appSocket);
      throttled(appSocket, budget).pipe(counted('out')).pipe(socket);
      const finish = () => {
        socket.destroy();
        appSocket.destroy();
        channel.destroy();
        if (!this.live.delete(stream)) return;
        void this.events.emit({
          type: 'port_share.closed',
          message: `A WebSocket of ${visit.visitor} through the share of port ${visit.share.port} of host ${visit.host.shortId} closed (${reason})`,
          actor: { kind: 'system', id: null, username: null },
          userId: visit.host.ownerId,
          hostId: visit.host.id,
          data: {
            share_id: visit.share.id,
            short_id: visit.host.shortId,
            port: visit.share.port,
            label: visit.share.label,
            bytes_in: traffic.in,
            bytes_out: traffic.out,
            duration_ms: Date.now() - openedAt,
            reason,
          },
        });
      };
      socket.once('close', finish);
      appSocket.once('close', finish);
      appSocket.on('error', finish);
    });
    upstream.end();
  }

  /**
   * The visitor's pass for this share (its own cookie; any other share's is not looked at), checked now. A
   * WebSocket or a request that changes something must come from the share's own origin: a page of another
   * share (same-site on SHARE_PORTS) does not ride on this one's cookie.
   */
  private async admit(
    request: IncomingMessage,
    label: string,
    share: ShareVisit['share'],
    upgrade: boolean,
  ): Promise<ShareVisit> {
    const safe = request.method === 'GET' || request.method === 'HEAD' || request.method === 'OPTIONS';
    const origin = request.headers.origin;
    if ((upgrade || !safe) && origin !== undefined && !sameOrigin(origin, request.headers.host))
      throw errors.forbidden("Requests from another origin may not use this share's access");
    const pass = cookieValue(request.headers.cookie, `${SHARE_COOKIE_PREFIX}${label}`);
    if (!pass)
      throw errors.unauthorized(
        "This share is private: open it from the dashboard's Shared ports (or with its link)",
      );
    return this.options.shares.admit(share, pass);
  }

  private budgetOf(shareId: string): ByteBudget | null {
    const rate = this.options.settings.bytesPerSecond;
    if (rate <= 0) return null;
    let budget = this.budgets.get(shareId);
    if (!budget) {
      budget = new ByteBudget(rate);
      this.budgets.set(shareId, budget);
    }
    return budget;
  }

  private endWhere(match: (stream: LiveStream) => boolean, reason: string): void {
    for (const stream of [...this.live]) {
      // Each stream leaves the list when it closes (a WebSocket reports its close with the reason).
      if (match(stream)) stream.end(reason);
    }
  }

  private async recheckStreams(): Promise<void> {
    for (const stream of [...this.live]) {
      try {
        await this.options.shares.admit(stream.visit.share, stream.visit.pass);
      } catch (error) {
        const expired = error instanceof DomainError && /expired/.test(error.message);
        this.endWhere((s) => s === stream, expired ? 'expired' : 'revoked');
      }
    }
  }
}

/** A token bucket of `rate` bytes a second (a second's worth of burst), shared by every stream of one share. */
class ByteBudget {
  private available: number;
  private last = Date.now();
  constructor(private readonly rate: number) {
    this.available = rate;
  }

  /** Milliseconds to wait before `bytes` may pass. */
  take(bytes: number): number {
    const now = Date.now();
    this.available = Math.min(this.rate, this.available + ((now - this.last) * this.rate) / 1000);
    this.last = now;
    this.available -= bytes;
    return this.available >= 0 ? 0 : Math.ceil((-this.available * 1000) / this.rate);
  }
}

/**
 * The stream as the share's budget lets it through (itself without a limit). A side that fails (a visitor's
 * reset, the app's answer cut short) ends the limiter quietly: its own listeners end the share's streams, and an
 * error passed on to the limiter would have no listener and end the gateway.
 */
function throttled(source: Readable, budget: ByteBudget | null): Readable {
  if (!budget) return source;
  const gate = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      const wait = budget.take(chunk.length);
      if (wait === 0) done(null, chunk);
      else setTimeout(() => done(null, chunk), wait);
    },
  });
  source.on('error', () => gate.destroy());
  return source.pipe(gate);
}

/** The request's headers for the app: none of the gateway's credentials (cookies of shares, Authorization). */
function forwardedHeaders(request: IncomingMessage): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined || DROPPED_REQUEST_HEADERS.has(name) || name.startsWith('x-forwarded-')) continue;
    headers[name] = value;
  }
  const kept = (request.headers.cookie ?? '')
    .split(';')
    .map((part) => part.trim())
    .filter((part) => part !== '' && !GATEWAY_COOKIE.test(part));
  if (kept.length > 0) headers.cookie = kept.join('; ');
  headers['x-forwarded-for'] = request.socket.remoteAddress ?? '';
  headers['x-forwarded-proto'] = (request.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http';
  return headers;
}

/** The app's answer headers, without cookies it tries to set under the gateway's names. */
function returnedHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const kept: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || DROPPED_RESPONSE_HEADERS.has(name)) continue;
    kept[name] = value;
  }
  const cookies = (headers['set-cookie'] ?? []).filter((cookie) => !GATEWAY_COOKIE.test(cookie));
  if (cookies.length > 0) kept['set-cookie'] = cookies;
  return kept;
}

function statusLine(answer: IncomingMessage, headers: Record<string, string | string[]>): string {
  const lines = [`HTTP/1.1 ${answer.statusCode} ${answer.statusMessage ?? ''}`];
  for (const [name, value] of Object.entries(headers))
    for (const one of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${one}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

function cookieValue(header: string | undefined, name: string): string | null {
  for (const part of (header ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim() || null;
  }
  return null;
}

function sameOrigin(origin: string, host: string | undefined): boolean {
  try {
    return typeof host === 'string' && new URL(origin).host === host.toLowerCase();
  } catch {
    return false;
  }
}

/** An SSH channel as the HTTP client expects its socket (it sets these on sockets it is given). */
function asSocket(channel: Duplex): Socket {
  const socket = channel as Duplex & Partial<Socket>;
  socket.setNoDelay ??= () => socket as Socket;
  socket.setKeepAlive ??= () => socket as Socket;
  socket.setTimeout ??= () => socket as Socket;
  socket.ref ??= () => socket as Socket;
  socket.unref ??= () => socket as Socket;
  return socket as Socket;
}

function refusal(error: unknown, log: Logger): { status: number; body: string } {
  if (error instanceof DomainError && STATUS[error.kind])
    return { status: STATUS[error.kind]!, body: JSON.stringify({ error: error.message, code: error.code }) };
  log.error({ err: error }, 'serving a share failed');
  return { status: 500, body: JSON.stringify({ error: 'Internal server error', code: 'internal' }) };
}
