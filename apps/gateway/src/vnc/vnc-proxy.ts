import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import type { RecordedEvent, VncTicket } from '@ccp/api';
import type { Logger } from 'pino';
import WebSocket from 'ws';
import { type HostDialer, HostUnreachable } from '../cluster/host-dialer.js';
import type { Access } from '../domain/access/access.js';
import type { AuthService } from '../domain/access/auth-service.js';
import type { HostAccess } from '../domain/access/host-access.js';
import { actorOf, type CredentialHolder, type Principal } from '../domain/access/principal.js';
import { errors } from '../domain/errors.js';
import { SessionInputWatch } from '../domain/hosts/session-input.js';
import { BackgroundEvents } from '../events/background-events.js';
import type { EventBus } from '../events/event-bus.js';
import { isoOut } from '../shared/clock.js';
import { desktopFile } from './desktop-files.js';
import { RfbClientInput } from './rfb-client-input.js';
import { joinRfb } from './rfb-handshake.js';
import {
  type DesktopCredential,
  desktopCredential,
  originAllowed,
  type Portal,
  vncBasePath,
  vncPagePath,
  vncPassPath,
} from './vnc-access.js';

/** websockify's stream path; any path the web client asks for below the desktop's prefix is mapped onto it. */
const STREAM_PATH = '/websockify';
/** A side stops reading while the other has more than this queued, and reads again below LOW_WATER. */
const HIGH_WATER = 1024 * 1024;
const LOW_WATER = 256 * 1024;
/** Framebuffer updates of a large screen can be several MB in one message. */
const MAX_MESSAGE = 64 * 1024 * 1024;
/** Who may use one host's desktop, found for every request. */
export interface DesktopAccess {
  portal: Portal;
  principal: CredentialHolder;
  host: HostAccess;
  source: DesktopCredential['kind'];
  /** The prefix the page and its stream are below: the pass's own for a pass in the path. */
  basePath: string;
  /** The file asked for below that prefix. */
  rest: string;
}

export interface VncProxyOptions {
  auth: AuthService;
  access: Access;
  /** Reaches the desktop, on this node or through the host's node. */
  dialer: HostDialer;
  bus: EventBus;
  log: Logger;
  publicApiUrl: string;
  /** How often live sessions are checked against their host's and user's state. */
  recheckMs?: number;
}

interface LiveSession {
  id: string;
  access: DesktopAccess;
  client: WebSocket;
  clientAddress: string;
  openedAt: number;
  traffic: { toDesktop: number; toClient: number };
  /** The browser's RFB messages, read for a person's input. */
  input: RfbClientInput;
  closeReason: string;
}

/**
 * The desktop's proxy: the web client's files from the gateway's own copy, and the stream as a WebSocket held
 * on both sides (so each side gets a proper close frame when the host stops or the user loses access), with
 * backpressure per direction. The workspace is reached through the relay in its egress gateway only.
 */
export class VncProxy {
  private readonly live = new Map<string, LiveSession>();
  /** Hosts whose desktops got a person's keys, pointer or clipboard (not the viewer's own update requests). */
  readonly input = new SessionInputWatch(
    () => this.live.values(),
    (session) => session.access.host.id,
    (session) => session.input.events,
  );
  private readonly events: BackgroundEvents;
  private readonly recheck: NodeJS.Timeout;

  constructor(private readonly options: VncProxyOptions) {
    this.events = new BackgroundEvents(options.bus, options.log);
    options.bus.on('user.access_ended', ({ userId, reason }) => {
      this.closeWhere(
        (s) => s.access.principal.id === userId || s.access.host.ownerId === userId,
        `user_${reason}`,
      );
    });
    this.recheck = setInterval(() => {
      this.recheckSessions().catch((error: unknown) =>
        options.log.warn({ err: error }, 'rechecking desktop sessions failed'),
      );
    }, options.recheckMs ?? 5000);
    this.recheck.unref();
  }

  /** Live desktop streams, for the dashboard. */
  sessionCount(): number {
    return this.live.size;
  }

  /**
   * A one-time link to a host's desktop for the caller: the page's address carries a ticket that is good once,
   * for 60 seconds, on this host's desktop only; the API token never goes in a URL.
   */
  async ticket(principal: Principal, hostId: string): Promise<VncTicket> {
    const { ticket, expiresAt, host } = await this.options.access.desktopTicket(principal, hostId);
    const page = vncPagePath(vncBasePath(principal.role, host.id));
    return {
      url: `${this.options.publicApiUrl}${page}&ticket=${ticket}`,
      expires_at: isoOut(expiresAt.toISOString()),
    };
  }

  /** Authenticates one request below a desktop's prefix (`rest`: the path below it): 401 without a valid
   * credential, 403 for the wrong role, 404 for a host the caller may not reach, 403 for an upgrade from a foreign
   * origin. */
  async authorize(
    portal: Portal,
    hostId: string,
    headers: IncomingHttpHeaders,
    query: URLSearchParams,
    rest: string,
    upgrade: boolean,
  ): Promise<DesktopAccess> {
    const { credential, rest: file } = desktopCredential(headers, query, rest);
    if (!credential)
      throw errors.unauthorized('A bearer token, a desktop ticket or a desktop pass in the path is required');
    if (credential.kind === 'ticket' && upgrade)
      throw errors.unauthorized(
        "A desktop ticket opens the page; the page's stream uses the pass in its path",
      );
    const principal = await this.holderOf(credential, portal, hostId);
    if (principal.role !== portal)
      throw errors.forbidden(`This desktop path needs ${portal === 'admin' ? 'an admin' : 'a user'} token`);
    const host = await this.options.access.desktopHost(principal, hostId);
    if (upgrade && !originAllowed(headers, this.options.publicApiUrl))
      throw errors.forbidden('The WebSocket origin is not allowed');
    const basePath = vncBasePath(portal, hostId);
    return {
      portal,
      principal,
      host,
      source: credential.kind,
      basePath: credential.kind === 'pass' ? vncPassPath(basePath, credential.pass) : basePath,
      rest: file,
    };
  }

  private holderOf(credential: DesktopCredential, portal: Portal, hostId: string): Promise<CredentialHolder> {
    switch (credential.kind) {
      case 'header':
        return this.options.auth.authenticateHolder(credential.token);
      case 'ticket':
        return this.options.access.redeemDesktopTicket(credential.ticket, portal, hostId);
      case 'pass':
        return this.options.auth.authenticateDesktopPass(credential.pass, hostId);
    }
  }

  /** The page a ticket redirects to: below a prefix holding a pass for this host's desktop alone (never the API
   * token), which the web client's later requests and its stream carry in their paths (they cannot add headers). */
  passPageFor(access: DesktopAccess): string {
    const { pass } = this.options.auth.desktopPass(access.principal, access.host.id);
    return vncPagePath(vncPassPath(access.basePath, pass));
  }

  /**
   * One file of the web client, from the gateway's own copy (desktop-files.ts): the workspace's own web server
   * is never asked for a page or a script, so nothing it serves runs on the gateway's origin.
   */
  async fetchFile(
    access: DesktopAccess,
    rest: string,
  ): Promise<{ status: number; headers: Record<string, string>; body: Readable }> {
    // The page is for a desktop that can be reached: a stopped host answers 409 as its stream would.
    await this.requirePath(access.host);
    const file = desktopFile(rest);
    if (file === null) throw errors.notFound('File');
    return { status: 200, headers: file.headers, body: createReadStream(file.path) };
  }

  /**
   * Joins an accepted client WebSocket to the desktop's stream. The gateway answers the desktop's VNC
   * authentication with the host's password and offers the browser none (joinRfb), so the password never leaves
   * the gateway; past that handshake every byte is relayed as it is.
   */
  openSession(client: WebSocket, access: DesktopAccess, clientAddress: string): void {
    // Nothing is read from the client until the desktop's side is open.
    client.pause();
    const session: LiveSession = {
      id: randomUUID(),
      access,
      client,
      clientAddress,
      openedAt: Date.now(),
      traffic: { toDesktop: 0, toClient: 0 },
      input: new RfbClientInput(),
      closeReason: 'client_closed',
    };
    const fail = (reason: string) => {
      // Read again, or the client's answer to the close frame waits unread for ws's 30 s close timeout.
      client.resume();
      if (client.readyState === WebSocket.OPEN) client.close(1011, reason.slice(0, 120));
    };
    this.dialDesktop(access.host).then(
      (socket) => {
        if (client.readyState !== WebSocket.OPEN) return socket.destroy();
        // The name is never resolved: the connection is the one just made, to the workspace or its node.
        const upstream = new WebSocket(`ws://workspace${STREAM_PATH}`, ['binary'], {
          perMessageDeflate: false,
          maxPayload: MAX_MESSAGE,
          handshakeTimeout: 10_000,
          createConnection: () => socket,
        });
        upstream.on('error', (error) => {
          this.options.log.warn({ err: error, host_id: access.host.id }, 'desktop stream failed');
          if (!this.live.has(session.id)) fail('desktop unreachable');
        });
        client.on('close', () => {
          if (upstream.readyState === WebSocket.CONNECTING) upstream.terminate();
        });
        upstream.on('open', () => {
          if (client.readyState !== WebSocket.OPEN) {
            upstream.terminate();
            return;
          }
          client.resume();
          joinRfb(client, upstream, this.options.access.desktopPassword(access.host.id)).then(
            (pending) => this.relaySession(session, upstream, pending),
            (error: Error) => {
              this.options.log.warn({ err: error, host_id: access.host.id }, 'desktop handshake failed');
              upstream.terminate();
              fail(error.message);
            },
          );
        });
      },
      (error: Error) => fail(error.message),
    );
  }

  /** Past the handshake: counts, relays and logs the stream, starting with what either side sent meanwhile. */
  private relaySession(
    session: LiveSession,
    upstream: WebSocket,
    pending: { fromBrowser: Buffer; fromDesktop: Buffer; passwordProtected: boolean },
  ): void {
    const { client } = session;
    if (client.readyState !== WebSocket.OPEN || upstream.readyState !== WebSocket.OPEN) {
      upstream.terminate();
      if (client.readyState === WebSocket.OPEN) client.close(1001, 'desktop_closed');
      return;
    }
    this.live.set(session.id, session);
    this.emitOpened(session, pending.passwordProtected);
    if (pending.fromBrowser.length > 0) {
      session.traffic.toDesktop += pending.fromBrowser.length;
      session.input.feed(pending.fromBrowser);
      upstream.send(pending.fromBrowser);
    }
    if (pending.fromDesktop.length > 0) {
      session.traffic.toClient += pending.fromDesktop.length;
      client.send(pending.fromDesktop);
    }
    relay(client, upstream, (data) => {
      session.traffic.toDesktop += data.length;
      session.input.feed(data);
    });
    relay(upstream, client, (data) => {
      session.traffic.toClient += data.length;
    });
    upstream.on('close', () => {
      if (session.closeReason === 'client_closed') session.closeReason = 'desktop_closed';
      if (client.readyState === WebSocket.OPEN) client.close(1001, session.closeReason);
    });
    client.on('close', () => {
      if (upstream.readyState === WebSocket.OPEN) upstream.close(1000);
      else upstream.terminate();
      if (this.live.delete(session.id)) this.emitClosed(session);
    });
  }

  /** Ends every session, and waits until their events are written. */
  async close(): Promise<void> {
    clearInterval(this.recheck);
    this.closeWhere(() => true, 'gateway_stopped');
    await this.events.settled();
  }

  /** 409 for a host that is not running, 503 for one with no path to its desktop (HostDialer.hasPath). */
  private async requirePath(host: HostAccess): Promise<void> {
    if (host.status !== 'running') throw hostNotRunning(host);
    if (!(await this.options.dialer.hasPath(host)))
      throw errors.unavailable('vnc_unreachable', 'The host has no path to its desktop');
  }

  /** A connection to the desktop's websockify; fails with the reason the browser is told. */
  private async dialDesktop(host: HostAccess): Promise<Socket> {
    if (host.status !== 'running') throw hostNotRunning(host);
    return this.options.dialer.open(host, 'desktop').catch((error: unknown) => {
      if (!(error instanceof HostUnreachable)) throw error;
      this.options.log.warn({ err: error, host_id: host.id }, 'desktop stream failed');
      // A desktop that does not answer is told as before nodes; another node's trouble names the node.
      throw new Error(error.reason === 'unreachable' ? 'desktop unreachable' : error.message);
    });
  }

  private closeWhere(match: (session: LiveSession) => boolean, reason: string): void {
    for (const session of this.live.values()) {
      if (!match(session)) continue;
      session.closeReason = reason;
      // 1001: the desktop is going away; 1008: the caller no longer may use it.
      session.client.close(reason.startsWith('user_') ? 1008 : 1001, reason);
    }
  }

  /** Ends sessions whose host left `running`, or whose caller lost access or changed password, without a
   * revocation reaching this gateway (another gateway's change, a lost notice). */
  private async recheckSessions(): Promise<void> {
    for (const session of [...this.live.values()]) {
      const { principal, host } = session.access;
      const reason = await this.options.access.liveSessionEnd(principal.id, host.id, principal.tokenVersion);
      if (reason) this.closeWhere((s) => s === session, reason);
    }
  }

  /**
   * A desktop that asked for no password runs a workspace made before desktop passwords: what reaches its relay
   * on the gateway's machine gets the desktop without one. Said on every session, until the host is rebuilt.
   */
  private emitOpened(session: LiveSession, passwordProtected: boolean): void {
    const { principal, host, portal } = session.access;
    this.emit({
      type: 'vnc.session.opened',
      ...(passwordProtected
        ? { message: `Desktop session of ${principal.username} to host ${host.shortId} opened` }
        : {
            level: 'warn',
            message: `Desktop session of ${principal.username} to host ${host.shortId} opened; its desktop has no password (a workspace made before desktop passwords): rebuild the host to give it one`,
          }),
      actor: actorOf(principal),
      userId: host.ownerId,
      hostId: host.id,
      data: {
        portal,
        short_id: host.shortId,
        client_address: session.clientAddress,
        desktop_locked: passwordProtected,
      },
    });
  }

  private emitClosed(session: LiveSession): void {
    const { principal, host, portal } = session.access;
    this.emit({
      type: 'vnc.session.closed',
      message: `Desktop session of ${principal.username} to host ${host.shortId} closed (${session.closeReason})`,
      actor: actorOf(principal),
      userId: host.ownerId,
      hostId: host.id,
      data: {
        portal,
        short_id: host.shortId,
        client_address: session.clientAddress,
        bytes_in: session.traffic.toDesktop,
        bytes_out: session.traffic.toClient,
        duration_ms: Date.now() - session.openedAt,
        reason: session.closeReason,
      },
    });
  }

  private emit(input: RecordedEvent): void {
    void this.events.emit(input);
  }
}

function hostNotRunning(host: HostAccess) {
  if (host.status === 'node_unavailable')
    return errors.conflict(
      'node_unavailable',
      `The host is on node ${host.node}, which has stopped answering; its desktop is back when that node is`,
    );
  return errors.conflict('host_not_running', 'The host is not running; start it before its desktop');
}

/** Forwards every message of `from` to `to`; `from` stops reading while `to` has too much queued. */
function relay(from: WebSocket, to: WebSocket, count: (data: Buffer) => void): void {
  let paused = false;
  const drained = () => {
    if (paused && to.bufferedAmount < LOW_WATER) {
      paused = false;
      from.resume();
    }
  };
  from.on('message', (data: Buffer, isBinary: boolean) => {
    count(data);
    if (to.readyState !== WebSocket.OPEN) return;
    to.send(data, { binary: isBinary }, drained);
    if (!paused && to.bufferedAmount > HIGH_WATER) {
      paused = true;
      from.pause();
    }
  });
}
