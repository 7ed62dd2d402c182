import { randomUUID } from 'node:crypto';
import net, { type AddressInfo, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { setImmediate as yieldToIo } from 'node:timers/promises';
import type { RecordedEvent } from '@ccp/api';
import type { Logger } from 'pino';
import ssh2, {
  type AuthContext,
  type BaseAgent,
  type Client,
  type ClientInfo,
  type Connection,
  type Server,
  type ServerChannel,
} from 'ssh2';
import { type HostDialer, HostUnreachable } from '../cluster/host-dialer.js';
import type { Access, Refusal as AccessRefusal, Credential } from '../domain/access/access.js';
import type { HostAccess } from '../domain/access/host-access.js';
import { actorOf, type CredentialHolder } from '../domain/access/principal.js';
import {
  type AccessSettings,
  accessCommand,
  linuxUserFor,
  portalHostUrl,
} from '../domain/hosts/host-view.js';
import { policyStopText } from '../domain/hosts/lifecycle-scheduler.js';
import { SessionInputWatch } from '../domain/hosts/session-input.js';
import type { StopRequester, TaskRunner } from '../domain/tasks/task-runner.js';
import { fingerprintOf } from '../domain/users/ssh-public-key.js';
import { BackgroundEvents } from '../events/background-events.js';
import type { EventBus } from '../events/event-bus.js';
import { SSH_ALGORITHMS, SSH_IDENT } from './algorithms.js';
import { FOLDER_MOUNT_SUBSYSTEM, type FolderMounts } from './folder-mounts.js';
import { loadOrCreateHostKey } from './host-key.js';
import { relayLocalForwards, relayRemoteForwards, relaySession, type Traffic } from './relay.js';
import {
  destroyConnection,
  nativeCryptoWarning,
  openAgentChannel,
  reusePacketBuffers,
  sendAuthBanner,
  socketOf,
} from './ssh2-internals.js';
import { WorkspaceLoginQueue } from './workspace-login-queue.js';

export interface SshProxyOptions {
  host: string;
  /** 0 picks a free port (tests); `port` tells which one was bound. */
  port: number;
  dataDir: string;
  /** Proves logins (SSH password, keys, one-time bootstrap tickets) and picks the host. */
  access: Access;
  bus: EventBus;
  /** Reaches the workspace's sshd, on this node or through the host's node. */
  dialer: HostDialer;
  /** Serves the CLI's folder mounts; without it the subsystem goes to the workspace (which refuses it). */
  folderMounts?: FolderMounts;
  /** Where a user can start a stopped host, for the refusal that says so. */
  accessSettings: AccessSettings;
  /** Who stopped a host, for that refusal (ccp repeats it when a session ends with the host). */
  tasks: Pick<TaskRunner, 'lastStop'>;
  limits: SshProxyLimits;
  log: Logger;
  timing?: Partial<SshProxyTiming>;
}

export interface SshProxyLimits {
  /** Connections from one address that have not logged in yet; past it new ones are closed at once. */
  unauthenticatedPerAddress: number;
  /** Live sessions of one user; past it a login is refused with a message. */
  sessionsPerUser: number;
  /**
   * Sessions of one host, open or logging in to its workspace; past it a login is refused with a message. At most
   * what the host's relay takes at once (RELAY_CONNECTIONS_PER_PORT), where one past would wait silently.
   */
  sessionsPerHost: number;
}

export interface SshProxyTiming {
  /** Keepalive interval both ways; a peer missing 3 in a row is cut (half-open connections). */
  keepaliveMs: number;
  /** Time a connection has to authenticate before it is dropped. */
  loginGraceMs: number;
  /** Time the workspace's sshd has to accept the gateway's login. */
  upstreamReadyMs: number;
  /** How often live sessions re-check their user and host (state changes not signalled otherwise). */
  recheckMs: number;
}

const DEFAULT_TIMING: SshProxyTiming = {
  keepaliveMs: 15_000,
  loginGraceMs: 60_000,
  upstreamReadyMs: 15_000,
  recheckMs: 30_000,
};

const METHODS: ('password' | 'publickey')[] = ['publickey', 'password'];
/** Logins to one workspace under way at once; its sshd drops what is past 10 (MaxStartups). */
const WORKSPACE_LOGINS_PER_HOST = 6;
/** How long a client told to disconnect has to close its side before the gateway drops the connection. */
const DISCONNECT_GRACE_MS = 2000;

/** A login that passed every check, with the workspace connection made for it. */
interface Admitted {
  user: CredentialHolder;
  host: HostAccess;
  upstream: Client;
}

interface LiveSession extends Admitted {
  id: string;
  connection: Connection;
  clientAddress: string;
  openedAt: number;
  traffic: Traffic;
  closeReason: string;
  /** Its channels with a terminal, where the gateway's notices are written. */
  terminals: Set<ServerChannel>;
}

/** Said to the client in a banner, then the connection ends: retrying with another secret cannot help. */
class Refusal extends Error {}

const REFUSALS: Record<
  Exclude<AccessRefusal['reason'], 'invalid_credentials'>,
  (r: AccessRefusal) => string
> = {
  rate_limited: (r) =>
    `too many failed login attempts; try again in ${'retryAfterSeconds' in r ? r.retryAfterSeconds : 1} seconds.`,
  busy: () => 'the gateway is busy checking passwords; try again shortly.',
  account_disabled: () => 'this account is disabled.',
  account_expired: () => 'this account has expired.',
};

/**
 * The SSH entrance on SSH_PROXY_PORT: authenticates `<username>[+<shortId>]` with the user's SSH password or
 * keys, then logs in to that host's workspace with the gateway's per-host key and relays everything the
 * client asks for. Users' secrets stop here; the workspace only ever sees the gateway's key.
 */
export class SshProxy {
  private readonly server: Server;
  private readonly live = new Map<string, LiveSession>();
  /** Hosts whose sessions carried the user's data to the workspace: keys, a mounted folder, forwarded ports. */
  readonly input = new SessionInputWatch(
    () => this.live.values(),
    (session) => session.host.id,
    (session) => session.traffic.toWorkspace,
  );
  private readonly pending = new Set<Connection>();
  /** Connections per client address that have not logged in yet (counted from the TCP accept). */
  private readonly unauthenticated = new Map<string, number>();
  /** For each socket not logged in yet: what lets it go (counted no more, its grace timer cleared). */
  private readonly loggingIn = new Map<Socket, () => void>();
  /** The listener: every socket passes `admit` before ssh2 sees it (which happens only once it sends a line). */
  private readonly tcp = net.createServer((socket) => this.admitSocket(socket));
  private readonly workspaceLogins = new WorkspaceLoginQueue(WORKSPACE_LOGINS_PER_HOST);
  /** Connections to each host's workspace, from before the dial until they close: what its relay holds. */
  private readonly workspaceConnections = new Map<string, number>();
  private readonly events: BackgroundEvents;
  private readonly timing: SshProxyTiming;
  private recheck: NodeJS.Timeout | null = null;

  constructor(private readonly options: SshProxyOptions) {
    this.events = new BackgroundEvents(options.bus, options.log);
    this.timing = { ...DEFAULT_TIMING, ...options.timing };
    this.server = new ssh2.Server(
      {
        hostKeys: [loadOrCreateHostKey(options.dataDir)],
        algorithms: SSH_ALGORITHMS,
        ident: SSH_IDENT,
        keepaliveInterval: this.timing.keepaliveMs,
        keepaliveCountMax: 3,
      },
      (connection, info) => this.accept(connection, info),
    );
    // Every reason ends the user's sessions, a changed password included: whoever held the old one is out.
    options.bus.on('user.access_ended', ({ userId, reason }) => {
      this.closeWhere((s) => s.user.id === userId, `user_${reason}`);
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.tcp.once('error', reject);
      this.tcp.listen(this.options.port, this.options.host, () => {
        this.tcp.off('error', reject);
        resolve();
      });
    });
    this.tcp.on('error', (error: Error) =>
      this.options.log.error({ err: error }, 'SSH proxy listener error'),
    );
    this.server.on('error', (error: Error) =>
      this.options.log.error({ err: error }, 'SSH proxy server error'),
    );
    const slow = nativeCryptoWarning();
    if (slow) this.options.log.warn(slow);
    this.recheck = setInterval(() => {
      this.recheckSessions().catch((error: unknown) =>
        this.options.log.warn({ err: error }, 'rechecking SSH sessions failed'),
      );
    }, this.timing.recheckMs);
    this.recheck.unref();
  }

  /** The bound port (the configured one, or the one picked for 0). */
  get port(): number {
    return (this.tcp.address() as AddressInfo).port;
  }

  /** Live (authenticated) connections, for the dashboard. */
  sessionCount(): number {
    return this.live.size;
  }

  /**
   * Writes a notice on its own line to every terminal of this gateway's sessions to a host (on stderr, so a
   * program reading the session's output is not fed it); answers how many terminals it reached.
   */
  tellSessions(hostId: string, text: string): number {
    let told = 0;
    for (const session of this.live.values()) {
      if (session.host.id !== hostId) continue;
      for (const terminal of session.terminals) {
        terminal.stderr.write(`\r\n*** cloud-cli-proxy: ${text} ***\r\n`);
        told += 1;
      }
    }
    return told;
  }

  /** Stops listening, ends every connection and waits until their events are written. */
  async close(): Promise<void> {
    if (this.recheck) clearInterval(this.recheck);
    const closed = new Promise<void>((resolve) => this.tcp.close(() => resolve()));
    for (const connection of this.pending) connection.end();
    this.closeWhere(() => true, 'gateway_stopped');
    await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 5_000).unref())]);
    await this.options.folderMounts?.closeAll();
    await this.events.settled();
  }

  /**
   * A new TCP connection: at most `unauthenticatedPerAddress` from one address may be logging in at once, each
   * for the login grace at most, silent ones included. Past that it is closed at once, as OpenSSH's MaxStartups
   * does: before the key exchange there is no way to say why.
   */
  private admitSocket(socket: Socket): void {
    const address = (socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    socket.on('error', () => {}); // ssh2 hears it too, as the connection's end
    const waiting = this.unauthenticated.get(address) ?? 0;
    if (waiting >= this.options.limits.unauthenticatedPerAddress) {
      this.options.log.warn(
        { client: address, waiting },
        'SSH connection closed: too many from this address are logging in',
      );
      socket.destroy();
      return;
    }
    this.unauthenticated.set(address, waiting + 1);
    const grace = setTimeout(() => socket.destroy(), this.timing.loginGraceMs);
    const letGo = () => {
      if (!this.loggingIn.delete(socket)) return;
      clearTimeout(grace);
      const left = (this.unauthenticated.get(address) ?? 1) - 1;
      if (left > 0) this.unauthenticated.set(address, left);
      else this.unauthenticated.delete(address);
    };
    this.loggingIn.set(socket, letGo);
    socket.once('close', letGo);
    this.server.injectSocket(socket);
  }

  private accept(connection: Connection, info: ClientInfo): void {
    const clientAddress = info.ip.replace(/^::ffff:/, '');
    const log = this.options.log.child({ client: `${clientAddress}:${info.port}` });

    // Public in ssh2's server (server.js), missing from @types/ssh2.
    (connection as Connection & { setNoDelay(noDelay: boolean): void }).setNoDelay(true);
    reusePacketBuffers(connection, socketOf(connection));
    this.pending.add(connection);
    let admitted: Admitted | null = null;
    let gone = false;
    const grace = setTimeout(() => connection.end(), this.timing.loginGraceMs);

    connection.on('authentication', (ctx) => {
      this.authenticate(ctx, connection, clientAddress)
        .then((result) => {
          if (!result) return;
          // The client may have left while the workspace login was under way.
          if (gone) return result.upstream.end();
          admitted = result;
          ctx.accept();
        })
        .catch((error: unknown) => {
          if (error instanceof Refusal) {
            sendAuthBanner(connection, `cloud-cli-proxy: ${error.message}`);
            ctx.reject(METHODS);
            connection.end();
            return;
          }
          log.error({ err: error }, 'SSH authentication failed with an error');
          ctx.reject(METHODS);
        });
    });
    connection.on('ready', () => {
      clearTimeout(grace);
      const socket = socketOf(connection);
      if (socket) this.loggingIn.get(socket)?.();
      this.pending.delete(connection);
      if (admitted) this.open(connection, admitted, clientAddress);
    });
    connection.on('error', (error: Error) => log.debug({ err: error }, 'SSH client connection error'));
    connection.on('close', () => {
      gone = true;
      clearTimeout(grace);
      this.pending.delete(connection);
      // Gone between its login and the session: the workspace's side (and the host's relay) is let go too.
      admitted?.upstream.end();
    });
  }

  /** Decides one authentication request. Null means "not this way" (the client may try another secret). */
  private async authenticate(
    ctx: AuthContext,
    connection: Connection,
    clientAddress: string,
  ): Promise<Admitted | null> {
    if (ctx.method !== 'password' && ctx.method !== 'publickey') {
      ctx.reject(METHODS);
      return null;
    }
    const { access } = this.options;
    const { username, shortId } = parseLoginName(ctx.username);
    let credential: Credential;
    if (ctx.method === 'password') {
      credential = { kind: 'ssh_password', username, password: ctx.password };
    } else {
      const fingerprint = fingerprintOf(ctx.key.data);
      // OpenSSH offers every key it has; keys that are not this user's are declined, not counted as failures.
      if (!(await access.ownsKey(username, fingerprint))) {
        ctx.reject(METHODS);
        return null;
      }
      if (!ctx.signature || !ctx.blob) {
        ctx.accept(); // "would this key do?": yes; the client signs next
        return null;
      }
      const parsed = ssh2.utils.parseKey(ctx.key.data);
      const signed =
        !(parsed instanceof Error) &&
        !Array.isArray(parsed) &&
        parsed.verify(ctx.blob, ctx.signature, ctx.hashAlgo);
      credential = { kind: 'ssh_key', username, fingerprint, signed };
    }

    const admission = await access.admit(credential, 'ssh', clientAddress);
    if (!admission.admitted) {
      if (admission.reason === 'invalid_credentials') {
        ctx.reject(METHODS);
        return null;
      }
      throw new Refusal(REFUSALS[admission.reason](admission));
    }
    const { user, ticket } = admission;

    const refuse = async (reason: string, text: string, host?: HostAccess): Promise<never> => {
      await this.emit({
        type: 'auth.ssh.failed',
        level: 'warn',
        message: `SSH login refused for ${user.username}: ${text}`,
        actor: actorOf(user),
        userId: user.id,
        hostId: host?.id ?? null,
        data: { username: user.username, client_address: clientAddress, method: ctx.method, reason },
      });
      throw new Refusal(text);
    };
    const found = await access.sshHost(user, shortId, ticket);
    if (!found.ok) return refuse(found.reason, found.message, found.host);
    const { sessionsPerUser } = this.options.limits;
    if ([...this.live.values()].filter((s) => s.user.id === user.id).length >= sessionsPerUser)
      return refuse(
        'too_many_sessions',
        `${user.username} has ${sessionsPerUser} SSH sessions open, the most one user may have; close one and try again.`,
        found.host,
      );
    const { host, workspaceKey: gatewayKey } = found;
    const { sessionsPerHost } = this.options.limits;
    const release = this.holdWorkspaceConnection(host.id);
    if (!release)
      return refuse(
        'too_many_host_sessions',
        `host ${host.shortId} has ${sessionsPerHost} SSH sessions open or opening, the most one host may have ` +
          '(SSH_MAX_SESSIONS_PER_HOST); close one of them and try again, or ask your administrator to raise the limit.',
        host,
      );
    try {
      // The dial counts too: the workspace's sshd counts a connection from its accept until the login is done.
      const admitted = await this.workspaceLogins.run(host.id, () =>
        this.loginToWorkspace(user, host, gatewayKey, connection, refuse),
      );
      admitted.upstream.once('close', release);
      return admitted;
    } catch (error) {
      release();
      throw error;
    }
  }

  /** Counts a connection to the host's workspace; null when it holds the most one host may have. */
  private holdWorkspaceConnection(hostId: string): (() => void) | null {
    const held = this.workspaceConnections.get(hostId) ?? 0;
    if (held >= this.options.limits.sessionsPerHost) return null;
    this.workspaceConnections.set(hostId, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.workspaceConnections.get(hostId) ?? 1) - 1;
      if (left > 0) this.workspaceConnections.set(hostId, left);
      else this.workspaceConnections.delete(hostId);
    };
  }

  /** Opens the host's workspace and logs in there with the gateway's key for this user's session. */
  private async loginToWorkspace(
    user: CredentialHolder,
    host: HostAccess,
    gatewayKey: string | null,
    connection: Connection,
    refuse: (reason: string, text: string, host?: HostAccess) => Promise<never>,
  ): Promise<Admitted> {
    let sock: Duplex | null = null;
    if (host.status === 'running' && gatewayKey) {
      try {
        sock = await this.options.dialer.open(host, 'ssh');
      } catch (error) {
        if (!(error instanceof HostUnreachable)) throw error;
        if (error.reason !== 'no_path') {
          this.options.log.warn({ err: error, hostId: host.id }, 'reaching the workspace failed');
          return refuse(
            'workspace_unreachable',
            error.reason === 'node_unreachable'
              ? `host ${host.shortId} runs on node ${host.node}, which does not answer this gateway; try again shortly.`
              : `host ${host.shortId} is running but its SSH service does not answer; try again shortly.`,
            host,
          );
        }
      }
    }
    if (host.status === 'node_unavailable')
      return refuse(
        'node_unavailable',
        `host ${host.shortId} is on node ${host.node}, which has stopped answering; it is back when that node is (ask your administrator)`,
        host,
      );
    if (!sock || !gatewayKey) {
      if (host.status !== 'running' && !(await this.options.access.canStart(host.id)))
        return refuse(
          'no_egress_bound',
          `host ${host.shortId} has no egress IP, so it cannot start; ask your administrator to bind one`,
          host,
        );
      const stop = ['stopped', 'stopping'].includes(host.status)
        ? await this.options.tasks.lastStop(host.id)
        : null;
      return refuse(
        'host_not_running',
        `host ${host.shortId} is ${host.status === 'running' ? 'not reachable' : host.status}` +
          `${stop ? ` (${stopText(stop, user, host)})` : ''}; ` +
          `start it with the Start button at ${portalHostUrl(this.options.accessSettings, host.id)}, or run ` +
          `its access command, which starts it and connects: ${accessCommand(this.options.accessSettings, host.shortId)}`,
        host,
      );
    }
    let upstream: Client;
    try {
      upstream = await this.connectWorkspace(sock, linuxUserFor(user.username), gatewayKey, connection);
    } catch (error) {
      sock.destroy();
      this.options.log.warn({ err: error, hostId: host.id }, 'logging in to the workspace failed');
      return refuse(
        'workspace_unreachable',
        `host ${host.shortId} is running but its SSH service does not answer; try again shortly.`,
        host,
      );
    }
    return { user, host, upstream };
  }

  private connectWorkspace(
    sock: Duplex,
    linuxUser: string,
    privateKey: string,
    connection: Connection,
  ): Promise<Client> {
    const upstream = new ssh2.Client();
    return new Promise((resolve, reject) => {
      let ready = false;
      // Heard for the client's whole life: a failed login can report more than one error (the socket's, then
      // "Connection lost before handshake"), and one with no listener would end the gateway for everyone.
      upstream.on('error', (error: Error) => {
        if (ready) this.options.log.debug({ err: error }, 'workspace SSH connection error');
        else {
          upstream.end();
          reject(error);
        }
      });
      upstream.once('ready', () => {
        ready = true;
        resolve(upstream);
      });
      upstream.connect({
        sock,
        username: linuxUser,
        privateKey,
        // Only the gateway's key: the agent below exists to serve forwarding, never to log in with.
        authHandler: ['publickey'],
        agent: forwardingAgent(connection),
        readyTimeout: this.timing.upstreamReadyMs,
        keepaliveInterval: this.timing.keepaliveMs,
        keepaliveCountMax: 3,
        // The workspace is reachable only through its egress gateway's relay, from the gateway's own address;
        // its host key lives in a per-host volume the gateway does not record, so there is nothing to pin.
        hostVerifier: () => true,
      });
      // Both legs carry keystrokes and small exec round trips: Nagle plus delayed ACKs added ~35 ms to each.
      upstream.setNoDelay(true);
      reusePacketBuffers(upstream, sock);
    });
  }

  private open(connection: Connection, admitted: Admitted, clientAddress: string): void {
    const session: LiveSession = {
      ...admitted,
      id: randomUUID(),
      connection,
      clientAddress,
      openedAt: Date.now(),
      traffic: { toWorkspace: 0, toClient: 0 },
      closeReason: 'client_closed',
      terminals: new Set(),
    };
    const { user, host, upstream, traffic } = session;
    this.live.set(session.id, session);
    // A revocation announced while this login was being checked found no session to end: read again now that it
    // is listed, so a login racing a password change is not left open until the next round.
    void this.recheckOne(session).catch((error: unknown) =>
      this.options.log.warn({ err: error }, 'checking a new SSH session failed'),
    );
    const { folderMounts } = this.options;
    const own: Record<string, (channel: ServerChannel) => void> = folderMounts
      ? {
          [FOLDER_MOUNT_SUBSYSTEM]: (channel: ServerChannel) =>
            folderMounts.handle(channel, {
              hostId: host.id,
              shortId: host.shortId,
              linuxUser: linuxUserFor(user.username),
              user,
              actor: actorOf(user),
              clientAddress,
              traffic,
              remoteNode: this.options.dialer.remoteNode(host),
            }),
        }
      : {};
    connection.on('session', (accept) => relaySession(accept(), upstream, traffic, own, session.terminals));
    relayLocalForwards(connection, upstream, traffic);
    relayRemoteForwards(connection, upstream, traffic);
    upstream.on('close', () => {
      if (session.closeReason === 'client_closed') session.closeReason = 'workspace_closed';
      connection.end();
    });
    connection.on('close', () => {
      this.live.delete(session.id);
      upstream.end();
      this.emit({
        type: 'ssh.session.closed',
        message: `SSH session of ${user.username} to host ${host.shortId} closed (${session.closeReason})`,
        actor: actorOf(user),
        userId: user.id,
        hostId: host.id,
        data: {
          username: user.username,
          short_id: host.shortId,
          client_address: clientAddress,
          bytes_in: traffic.toWorkspace,
          bytes_out: traffic.toClient,
          duration_ms: Date.now() - session.openedAt,
          reason: session.closeReason,
        },
      });
    });
    this.emit({
      type: 'ssh.session.opened',
      message: `SSH session of ${user.username} to host ${host.shortId} opened`,
      actor: actorOf(user),
      userId: user.id,
      hostId: host.id,
      data: { username: user.username, short_id: host.shortId, client_address: clientAddress },
    });
  }

  private closeWhere(match: (session: LiveSession) => boolean, reason: string): void {
    for (const session of this.live.values()) {
      if (!match(session)) continue;
      session.closeReason = reason;
      session.connection.end();
      // The workspace's side too: nothing is relayed meanwhile, even to a client slow to take the disconnect
      // (or one that ignores it).
      session.upstream.end();
      // A client that keeps its side open after the disconnect would keep the session (and its slot) forever.
      setTimeout(() => destroyConnection(session.connection), DISCONNECT_GRACE_MS).unref();
    }
  }

  /**
   * Ends sessions whose host left `running` or whose user lost access without a revocation reaching us. One check
   * per user and host, not per session, with a turn of the event loop between them: on SQLite a check runs
   * synchronously, and a thousand sessions checked in a row held every keystroke relayed meanwhile.
   */
  private async recheckSessions(): Promise<void> {
    const groups = new Map<string, LiveSession[]>();
    for (const session of this.live.values()) {
      const key = `${session.user.id} ${session.host.id} ${session.user.tokenVersion}`;
      const group = groups.get(key);
      if (group) group.push(session);
      else groups.set(key, [session]);
    }
    for (const sessions of groups.values()) {
      const { user, host } = sessions[0]!;
      const reason = await this.options.access.liveSessionEnd(user.id, host.id, user.tokenVersion);
      if (reason) this.closeWhere((s) => sessions.includes(s), reason);
      await yieldToIo();
    }
  }

  private async recheckOne(session: LiveSession): Promise<void> {
    const reason = await this.options.access.liveSessionEnd(
      session.user.id,
      session.host.id,
      session.user.tokenVersion,
    );
    if (reason) this.closeWhere((s) => s === session, reason);
  }

  private emit(input: RecordedEvent): Promise<void> {
    return this.events.emit(input);
  }
}

/** Who stopped the host and when, as the one refused hears it ("stopped by … at …"; ccp reads it). */
function stopText(stop: { by: StopRequester; at: string }, user: CredentialHolder, host: HostAccess): string {
  const { by, at } = stop;
  // The gateway stops hosts by itself for their lifecycle policy, or when their owner's account ends.
  if (by.kind === 'system')
    return host.policyStopReason
      ? `stopped by the gateway at ${at} for its ${host.policyStopReason === 'egress_budget' ? 'egress budget' : 'lifecycle policy'}, ${policyStopText(host.policyStopReason)}`
      : `stopped by the gateway at ${at}, as the account was disabled or expired`;
  const who =
    by.username === user.username
      ? `you (${user.username})`
      : by.kind === 'admin'
        ? `the administrator ${by.username}`
        : `the user ${by.username}`;
  return `stopped by ${who} at ${at}`;
}

/** `<username>+<shortId>` names a host; a bare `<username>` means the user's only host. */
export function parseLoginName(login: string): { username: string; shortId: string | null } {
  const at = login.lastIndexOf('+');
  if (at <= 0) return { username: login, shortId: null };
  return { username: login.slice(0, at), shortId: login.slice(at + 1).toLowerCase() };
}

/** An ssh2 agent whose only use is forwarding: each agent channel the workspace opens is opened to the
 * client (which asked for it with -A), and ssh2 splices the two. */
function forwardingAgent(connection: Connection): BaseAgent {
  const agent = Object.create(ssh2.BaseAgent.prototype) as BaseAgent & {
    getStream(callback: (error: Error | undefined, stream?: unknown) => void): void;
  };
  agent.getStream = (callback) => {
    openAgentChannel(connection).then(
      (channel) => callback(undefined, channel),
      (error: Error) => callback(error),
    );
  };
  return agent;
}
