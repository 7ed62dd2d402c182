import { randomUUID } from 'node:crypto';
import type { RecordedEvent, TerminalSession, TerminalTicket, TerminalTicketRequest } from '@ccp/api';
import { LIST_SESSIONS, parseSessions } from '@ccp/api/tmux';
import type { Logger } from 'pino';
import ssh2, { type Client, type ClientChannel } from 'ssh2';
import WebSocket from 'ws';
import { type HostDialer, HostUnreachable } from '../cluster/host-dialer.js';
import type { Access, TerminalRequest, WorkspaceLogin } from '../domain/access/access.js';
import type { HostGrant } from '../domain/access/grants.js';
import type { HostAccess } from '../domain/access/host-access.js';
import { actorOf, type CredentialHolder, type Principal } from '../domain/access/principal.js';
import { errors } from '../domain/errors.js';
import { linuxUserFor } from '../domain/hosts/host-view.js';
import { SessionInputWatch } from '../domain/hosts/session-input.js';
import { BackgroundEvents } from '../events/background-events.js';
import type { EventBus } from '../events/event-bus.js';
import { isoOut } from '../shared/clock.js';
import type { Traffic } from './relay.js';
import { attachScript, DEFAULT_SESSION, freshSessionName, scrollCommand } from './tmux-attach.js';

type Portal = 'admin' | 'user';

/** The workspace's side stops being read while the browser has more than this queued, and again below LOW_WATER. */
const HIGH_WATER = 512 * 1024;
const LOW_WATER = 128 * 1024;
const DEFAULT_SIZE = { cols: 80, rows: 24 };

export interface WebTerminalOptions {
  access: Access;
  /** Reaches the workspace's sshd, on this node or through the host's node. */
  dialer: HostDialer;
  bus: EventBus;
  log: Logger;
  publicApiUrl: string;
  /** Browser terminals one user may have open on this gateway; past it a ticket or an open is refused. */
  terminalsPerUser: number;
  /** How often live terminals re-check their user and host; also the WebSocket ping interval. */
  recheckMs?: number;
  /** Time the workspace's sshd has to accept the gateway's login. */
  upstreamReadyMs?: number;
}

/** Who opens which terminal, found from the ticket of the WebSocket's request. */
export interface TerminalAccess {
  portal: Portal;
  principal: CredentialHolder;
  login: WorkspaceLogin;
  request: TerminalRequest;
}

interface LiveTerminal {
  id: string;
  access: TerminalAccess;
  client: WebSocket;
  upstream: Client | null;
  clientAddress: string;
  openedAt: number;
  traffic: Traffic;
  closeReason: string;
}

/** Why a terminal ended, as the browser reads it from the close frame: 1008 is for the caller (never retried). */
const CLOSE_CODES: Record<string, number> = {
  session_ended: 1000,
  host_stopped: 1001,
  gateway_stopped: 1001,
  too_many_terminals: 1008,
};

/**
 * The browser terminal: a WebSocket (opened with a one-time ticket) joined to a tmux client that the gateway runs
 * in the workspace over SSH, as the SSH proxy does: the gateway's per-host key, through the workspace's relay or
 * its node. The tmux session lives in the workspace, so a dropped WebSocket loses nothing: the page asks for a
 * new ticket and attaches again. Revocations and the periodic re-check end terminals as they end SSH sessions.
 */
export class WebTerminals {
  private readonly live = new Map<string, LiveTerminal>();
  /** Hosts whose browser terminals carried the user's keys. */
  readonly input = new SessionInputWatch(
    () => this.live.values(),
    (terminal) => terminal.access.login.host.id,
    (terminal) => terminal.traffic.toWorkspace,
  );
  private readonly events: BackgroundEvents;
  private readonly recheck: NodeJS.Timeout;

  constructor(private readonly options: WebTerminalOptions) {
    this.events = new BackgroundEvents(options.bus, options.log);
    options.bus.on('user.access_ended', ({ userId, reason }) => {
      this.closeWhere(
        (t) => t.access.principal.id === userId || t.access.login.host.ownerId === userId,
        `user_${reason}`,
      );
    });
    this.recheck = setInterval(() => {
      this.recheckTerminals().catch((error: unknown) =>
        options.log.warn({ err: error }, 'rechecking browser terminals failed'),
      );
    }, options.recheckMs ?? 5000);
    this.recheck.unref();
  }

  /** Open browser terminals, for /metrics. */
  sessionCount(): number {
    return this.live.size;
  }

  /**
   * A one-time WebSocket address for a terminal on the host: good once within a minute, for this caller, host and
   * portal only. Refused at once when the caller has as many terminals open as one user may.
   */
  async ticket(principal: Principal, hostId: string, body: TerminalTicketRequest): Promise<TerminalTicket> {
    this.requireRoom(principal.id);
    const mode = body.mode ?? 'attach';
    const session = body.session ?? (mode === 'new' ? freshSessionName() : DEFAULT_SESSION);
    const { ticket, expiresAt, host } = await this.options.access.terminalTicket(principal, hostId, {
      session,
      mode,
      cols: body.cols ?? DEFAULT_SIZE.cols,
      rows: body.rows ?? DEFAULT_SIZE.rows,
    });
    const base = this.options.publicApiUrl.replace(/^http/, 'ws');
    return {
      url: `${base}/v1/${principal.role}/hosts/${host.id}/terminal/ws?ticket=${ticket}`,
      session,
      mode,
      expires_at: isoOut(expiresAt.toISOString()),
    };
  }

  /** The tmux sessions in the host's workspace (of its owner's Linux user), as `ccp sessions` lists them. */
  async sessions(grant: HostGrant): Promise<TerminalSession[]> {
    const login = this.options.access.terminalLogin(grant);
    if (login.host.status !== 'running') throw hostNotRunning(login.host);
    const upstream = await this.connect(login);
    try {
      return parseSessions(await execOutput(upstream, LIST_SESSIONS));
    } finally {
      upstream.end();
    }
  }

  /**
   * The WebSocket's request: its ticket (never an API token: `?token=` is refused), used up here whatever
   * follows; 401 for a ticket that is not good for this host and portal, 404 for a host the holder may no longer
   * reach, 409 for one that is not running.
   */
  async authorize(portal: Portal, hostId: string, query: URLSearchParams): Promise<TerminalAccess> {
    if (query.has('token'))
      throw errors.unauthorized(
        'API tokens do not go in URLs: open the terminal with a ticket (POST …/terminal/ticket)',
      );
    const ticket = query.get('ticket');
    if (!ticket) throw errors.unauthorized('A terminal ticket is required (POST …/terminal/ticket)');
    const { holder, request } = await this.options.access.redeemTerminalTicket(ticket, portal, hostId);
    const login = this.options.access.terminalLogin(
      await this.options.access.requireHost(holder, hostId, 'terminal'),
    );
    if (login.host.status !== 'running') throw hostNotRunning(login.host);
    return { portal, principal: holder, login, request };
  }

  /** Joins an accepted WebSocket to a tmux client in the workspace; what the browser sends waits until then. */
  open(client: WebSocket, access: TerminalAccess, clientAddress: string): void {
    client.pause();
    const terminal: LiveTerminal = {
      id: randomUUID(),
      access,
      client,
      upstream: null,
      clientAddress,
      openedAt: Date.now(),
      traffic: { toWorkspace: 0, toClient: 0 },
      closeReason: 'client_closed',
    };
    const fail = (reason: string, code = 1011) => {
      client.resume();
      if (client.readyState === WebSocket.OPEN) client.close(code, reason.slice(0, 120));
    };
    const { principal, login, request } = access;
    if (this.countOf(principal.id) >= this.options.terminalsPerUser) {
      fail('too_many_terminals', 1008);
      return;
    }
    // Listed before the workspace answers, so that a revocation meanwhile finds it, and the limit counts it.
    this.live.set(terminal.id, terminal);
    client.on('close', () => {
      terminal.upstream?.end();
      if (this.live.delete(terminal.id) && terminal.upstream) this.emitClosed(terminal);
    });
    this.connect(login)
      .then((upstream) => {
        if (!this.live.has(terminal.id) || client.readyState !== WebSocket.OPEN) return upstream.end();
        terminal.upstream = upstream;
        upstream.exec(
          attachScript(request.session, request.mode),
          { pty: { term: 'xterm-256color', cols: request.cols, rows: request.rows, width: 0, height: 0 } },
          (error, channel) => {
            if (error) {
              upstream.end();
              this.live.delete(terminal.id);
              return fail(`the workspace refused the terminal: ${error.message}`);
            }
            this.relay(terminal, upstream, channel);
          },
        );
      })
      .catch((error: Error) => {
        this.live.delete(terminal.id);
        fail(error.message);
      });
  }

  /** Ends every terminal, and waits until their events are written. */
  async close(): Promise<void> {
    clearInterval(this.recheck);
    this.closeWhere(() => true, 'gateway_stopped');
    await this.events.settled();
  }

  private relay(terminal: LiveTerminal, upstream: Client, channel: ClientChannel): void {
    const { client, traffic, access } = terminal;
    this.emitOpened(terminal);
    let paused = false;
    const drained = () => {
      if (paused && client.bufferedAmount < LOW_WATER) {
        paused = false;
        channel.resume();
      }
    };
    channel.on('data', (chunk: Buffer) => {
      traffic.toClient += chunk.length;
      if (client.readyState !== WebSocket.OPEN) return;
      client.send(chunk, { binary: true }, drained);
      if (!paused && client.bufferedAmount > HIGH_WATER) {
        paused = true;
        channel.pause();
      }
    });
    channel.on('error', () => {});
    channel.on('close', () => {
      const close = () => {
        if (client.readyState === WebSocket.OPEN)
          client.close(closeCode(terminal.closeReason), terminal.closeReason);
      };
      if (terminal.closeReason !== 'client_closed') {
        close();
        return;
      }
      // The tmux client left by itself, or the workspace went away with its host: the page is told which, as
      // only the first may be worth a new session.
      const {
        principal,
        login: { host },
      } = access;
      this.options.access
        .liveSessionEnd(principal.id, host.id, principal.tokenVersion)
        .catch(() => null)
        .then((reason) => {
          if (terminal.closeReason === 'client_closed') terminal.closeReason = reason ?? 'session_ended';
          close();
        });
    });
    client.on('message', (data: Buffer, isBinary: boolean) => {
      if (isBinary) {
        traffic.toWorkspace += data.length;
        channel.write(data);
        return;
      }
      const control = parseControl(data.toString('utf8'));
      if (control?.type === 'resize') channel.setWindow(control.rows, control.cols, 0, 0);
      else if (control?.type === 'scroll')
        upstream.exec(scrollCommand(access.request.session, control.lines), (error, stream) => {
          if (!error) stream.on('data', () => {}).on('error', () => {});
        });
    });
    client.on('close', () => channel.close());
    // A browser that vanished without a close (a phone losing its network) is found by its missing pongs.
    let alive = true;
    client.on('pong', () => {
      alive = true;
    });
    const ping = setInterval(() => {
      if (!alive) return client.terminate();
      alive = false;
      client.ping();
    }, this.options.recheckMs ?? 5000);
    ping.unref();
    client.on('close', () => clearInterval(ping));
    client.resume();
  }

  /** Logs in to the host's workspace as its owner's Linux user with the gateway's key for that host. */
  private async connect({ host, workspaceKey: key }: WorkspaceLogin): Promise<Client> {
    if (!key) throw errors.conflict('host_not_running', 'The host has not finished its first start');
    const sock = await this.options.dialer.open(host, 'ssh').catch((error: unknown) => {
      if (!(error instanceof HostUnreachable)) throw error;
      this.options.log.warn({ err: error, host_id: host.id }, 'reaching the workspace failed');
      throw errors.unavailable('workspace_unreachable', error.message);
    });
    const upstream = new ssh2.Client();
    return new Promise((resolve, reject) => {
      let ready = false;
      upstream.on('error', (error: Error) => {
        if (ready) return this.options.log.debug({ err: error }, 'workspace SSH connection error');
        upstream.end();
        sock.destroy();
        reject(
          errors.unavailable(
            'workspace_unreachable',
            `host ${host.shortId} is running but its SSH service does not answer; try again shortly`,
          ),
        );
      });
      upstream.once('ready', () => {
        ready = true;
        resolve(upstream);
      });
      upstream.connect({
        sock,
        username: linuxUserFor(host.ownerUsername),
        privateKey: key,
        authHandler: ['publickey'],
        readyTimeout: this.options.upstreamReadyMs ?? 15_000,
        keepaliveInterval: 15_000,
        keepaliveCountMax: 3,
        // As the SSH proxy: reached only through the host's relay, with no recorded host key to pin.
        hostVerifier: () => true,
      });
      upstream.setNoDelay(true);
    });
  }

  private countOf(userId: string): number {
    let count = 0;
    for (const terminal of this.live.values()) if (terminal.access.principal.id === userId) count++;
    return count;
  }

  private requireRoom(userId: string): void {
    const limit = this.options.terminalsPerUser;
    if (this.countOf(userId) >= limit)
      throw errors.conflict(
        'too_many_terminals',
        `You have ${limit} browser terminals open, the most one user may have; close one and try again`,
        { limit },
      );
  }

  private closeWhere(match: (terminal: LiveTerminal) => boolean, reason: string): void {
    for (const terminal of this.live.values()) {
      if (!match(terminal)) continue;
      terminal.closeReason = reason;
      // The workspace's side first: nothing typed reaches it after this, even from a browser slow to close.
      terminal.upstream?.end();
      terminal.client.close(closeCode(reason), reason);
      // A browser that does not answer the close frame is not kept waiting for (ws would wait 30 s).
      setTimeout(() => terminal.client.terminate(), 2000).unref();
    }
  }

  /** Ends terminals whose host left `running`, or whose caller lost access or changed password, without a
   * revocation reaching this gateway (another gateway's change, a lost notice). */
  private async recheckTerminals(): Promise<void> {
    for (const terminal of [...this.live.values()]) {
      const {
        principal,
        login: { host },
      } = terminal.access;
      const reason = await this.options.access.liveSessionEnd(principal.id, host.id, principal.tokenVersion);
      if (reason) this.closeWhere((t) => t === terminal, reason);
    }
  }

  private sessionData(terminal: LiveTerminal) {
    const {
      portal,
      login: { host },
      request,
    } = terminal.access;
    return {
      portal,
      short_id: host.shortId,
      client_address: terminal.clientAddress,
      session: request.session,
      mode: request.mode,
    };
  }

  private emitOpened(terminal: LiveTerminal): void {
    const {
      principal,
      login: { host },
      request,
    } = terminal.access;
    this.emit({
      type: 'terminal.session.opened',
      message: `Browser terminal of ${principal.username} to host ${host.shortId} opened (tmux session ${request.session}, ${request.mode})`,
      actor: actorOf(principal),
      userId: host.ownerId,
      hostId: host.id,
      data: this.sessionData(terminal),
    });
  }

  private emitClosed(terminal: LiveTerminal): void {
    const {
      principal,
      login: { host },
    } = terminal.access;
    this.emit({
      type: 'terminal.session.closed',
      message: `Browser terminal of ${principal.username} to host ${host.shortId} closed (${terminal.closeReason})`,
      actor: actorOf(principal),
      userId: host.ownerId,
      hostId: host.id,
      data: {
        ...this.sessionData(terminal),
        bytes_in: terminal.traffic.toWorkspace,
        bytes_out: terminal.traffic.toClient,
        duration_ms: Date.now() - terminal.openedAt,
        reason: terminal.closeReason,
      },
    });
  }

  private emit(input: RecordedEvent): void {
    void this.events.emit(input);
  }
}

const closeCode = (reason: string) => CLOSE_CODES[reason] ?? (reason.startsWith('user_') ? 1008 : 1011);

type Control = { type: 'resize'; cols: number; rows: number } | { type: 'scroll'; lines: number };

const within = (value: unknown, min: number, max: number): value is number =>
  Number.isInteger(value) && (value as number) >= min && (value as number) <= max;

/** A control message of the browser, or null for anything else (ignored: the terminal goes on). */
export function parseControl(text: string): Control | null {
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof message !== 'object' || message === null) return null;
  const m = message as Record<string, unknown>;
  if (m.type === 'resize' && within(m.cols, 10, 1000) && within(m.rows, 4, 500))
    return { type: 'resize', cols: m.cols, rows: m.rows };
  if (m.type === 'scroll' && within(m.lines, -500, 500) && m.lines !== 0)
    return { type: 'scroll', lines: m.lines };
  return null;
}

function hostNotRunning(host: HostAccess) {
  if (host.status === 'node_unavailable')
    return errors.conflict(
      'node_unavailable',
      `The host is on node ${host.node}, which has stopped answering; its terminal is back when that node is`,
    );
  return errors.conflict('host_not_running', 'The host is not running; start it before its terminal');
}

/** What a short command prints on its stdout (its status is not looked at: list commands end in `|| true`). */
function execOutput(upstream: Client, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    upstream.exec(command, (error, stream) => {
      if (error) return reject(error);
      const chunks: Buffer[] = [];
      let size = 0;
      stream.on('data', (chunk: Buffer) => {
        // A session list is small; a flood is cut, not held.
        size += chunk.length;
        if (size <= 1024 * 1024) chunks.push(chunk);
      });
      stream.stderr.on('data', () => {});
      stream.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
      stream.on('error', reject);
    });
  });
}
