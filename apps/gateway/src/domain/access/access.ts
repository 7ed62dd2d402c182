import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import type { Actor, Role } from '@ccp/api';
import { type EventBus, systemActor } from '../../events/event-bus.js';
import type { AccessTicketsRepository } from '../../store/access-tickets-repository.js';
import type { HostsRepository, HostWithOwner } from '../../store/hosts-repository.js';
import type { SshKeysRepository } from '../../store/ssh-keys-repository.js';
import type { TasksRepository } from '../../store/tasks-repository.js';
import type { UserRow, UsersRepository } from '../../store/users-repository.js';
import { type DomainError, errors } from '../errors.js';
import { sessionEndReason } from './access-revocation.js';
import { AccessTickets, type TicketGrant } from './access-tickets.js';
import { isExpired } from './account-expiry.js';
import { type HostAction, type HostGrant, hostOf, mint, type SystemGrant, type TaskGrant } from './grants.js';
import { type HostAccess, hostAccessOf } from './host-access.js';
import { type CredentialHolder, type Principal, actorOf as principalActor } from './principal.js';
import { FailureRateLimiter, limitedSource } from './rate-limiter.js';
import type { SecretBox } from './secret-box.js';
import { SHORT_ID_PATTERN, verifyAgainstNothing, verifyPassword } from './secrets.js';

/** Where a secret is presented; it names the events (`auth.<channel>.failed`). */
export type Channel = 'login' | 'entry' | 'bootstrap' | 'ssh';

export type Credential =
  /** The login password (scrypt): HTTP login, entry auth, bootstrap. */
  | { kind: 'password'; username: string; password: string }
  /** Over SSH: the SSH password (`ssh_pass`), the login password, or a one-time bootstrap ticket. */
  | { kind: 'ssh_password'; username: string; password: string }
  /** A registered SSH key; `signed` tells whether the protocol layer verified the client's signature with it. */
  | { kind: 'ssh_key'; username: string; fingerprint: string; signed: boolean };

export type Refusal =
  | { reason: 'invalid_credentials' }
  | { reason: 'rate_limited' | 'busy'; retryAfterSeconds: number }
  | { reason: 'account_disabled' | 'account_expired' };

/** An admitted account as the SSH proxy sees it (the token version ends its sessions when it moves on). */
export type Admission =
  | { admitted: true; user: CredentialHolder; ticket: TicketGrant | null }
  | ({ admitted: false } & Refusal);

type AccountAdmission =
  | { admitted: true; user: UserRow; ticket: TicketGrant | null }
  | ({ admitted: false } & Refusal);

/** A host as a login to its workspace needs it: the gateway's key for the workspace is null before its first start. */
export interface WorkspaceLogin {
  host: HostAccess;
  workspaceKey: string | null;
}

/** The host an SSH login reaches, with the gateway's key for the workspace (null before its first start). */
export type SshHost =
  | { ok: true; host: HostAccess; workspaceKey: string | null }
  | { ok: false; reason: string; message: string; host?: HostAccess };

const USER_HOST_ACTIONS: ReadonlySet<HostAction> = new Set(['view', 'operate', 'desktop', 'terminal', 'ssh']);

export interface AccessLimits {
  /** Password checks (scrypt) waiting or running for one client address; past it, 429 at once. */
  checksPerAddress: number;
  /** Password checks waiting or running in all; past it, 429 at once. */
  checksInAll: number;
  /** Bits of an IPv6 address that name one caller for every limit here (limitedSource). */
  ipv6PrefixBits: number;
}

const DEFAULT_LIMITS: AccessLimits = { checksPerAddress: 4, checksInAll: 32, ipv6PrefixBits: 64 };

/** How long a desktop ticket may wait to be used: the tab the dashboard opens uses it at once. */
const DESKTOP_TICKET_MS = 60_000;

/** What a desktop ticket opens: one host's desktop on one portal's path, for the account as it was then. */
interface DesktopGrant extends TicketGrant {
  portal: Role;
  tokenVersion: number;
}

/** What a terminal ticket opens: one browser terminal to one host on one portal's path, joining the tmux
 * session as asked, for the account as it was then. */
export interface TerminalGrant extends DesktopGrant {
  session: string;
  mode: 'attach' | 'new' | 'take_over';
  cols: number;
  rows: number;
}

export type TerminalRequest = Pick<TerminalGrant, 'session' | 'mode' | 'cols' | 'rows'>;

const ANONYMOUS: Actor = { kind: 'anonymous', id: null, username: null };
const actorOf = (user: UserRow): Actor => ({ kind: user.role, id: user.id, username: user.username });
const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The one place that decides who gets in and to which host: HTTP login, entry auth, bootstrap and the SSH
 * proxy prove secrets here, and every host-scoped action asks `requireHost`. Checks fail closed: an unknown
 * action, channel outcome or role is a refusal.
 */
export class Access {
  private readonly checking = new Map<string, number>();
  private checkingInAll = 0;
  private readonly limits: AccessLimits;
  private readonly desktopTickets: AccessTickets<DesktopGrant>;
  private readonly terminalTickets: AccessTickets<TerminalGrant>;

  constructor(
    private readonly users: UsersRepository,
    private readonly hosts: HostsRepository,
    private readonly sshKeys: SshKeysRepository,
    private readonly box: SecretBox,
    private readonly limiter: FailureRateLimiter,
    private readonly tickets: AccessTickets,
    private readonly bus: EventBus,
    ticketStore: AccessTicketsRepository,
    private readonly tasks: TasksRepository,
    limits: Partial<AccessLimits> = {},
  ) {
    this.limits = { ...DEFAULT_LIMITS, ...limits };
    this.desktopTickets = new AccessTickets<DesktopGrant>(ticketStore, 'desktop', DESKTOP_TICKET_MS);
    // The page asks for its ticket just before it opens the WebSocket: the desktop's minute is plenty.
    this.terminalTickets = new AccessTickets<TerminalGrant>(ticketStore, 'terminal', DESKTOP_TICKET_MS);
  }

  /** Proves a credential (`admitAccount`), for the SSH proxy: the account as the holder of that credential. */
  async admit(credential: Credential, channel: Channel, clientAddress: string): Promise<Admission> {
    const admission = await this.admitAccount(credential, channel, clientAddress);
    return admission.admitted ? { ...admission, user: holderOf(admission.user) } : admission;
  }

  /** Proves a credential. The account state is only revealed after the secret was proven; every outcome is logged. */
  private async admitAccount(
    credential: Credential,
    channel: Channel,
    clientAddress: string,
  ): Promise<AccountAdmission> {
    const { username } = credential;
    const method = credential.kind === 'ssh_key' ? 'publickey' : 'password';
    const user = await this.users.findByUsername(username);
    // A name that is no account's may be a password typed into the wrong field: the event log does not keep it.
    const named = user?.username ?? null;
    const context = {
      username: named,
      client_address: clientAddress,
      ...(channel === 'ssh' ? { method } : {}),
    };
    const label = channel === 'ssh' ? 'SSH login' : channel;
    // Key logins are never refused for password failures: guessing passwords must not lock keys out.
    const limited = credential.kind !== 'ssh_key';
    // Limits count the caller (an IPv6 /64 is one); events keep the address it came from.
    const source = this.sourceOf(clientAddress);
    const keys = FailureRateLimiter.keysFor(username, source);

    if (limited) {
      const retryAfterSeconds = await this.limiter.retryAfterSeconds(keys);
      if (retryAfterSeconds > 0) {
        await this.bus.emit({
          type: `auth.${channel}.rate_limited`,
          level: 'warn',
          message: `${label} refused: too many failed attempts`,
          actor: ANONYMOUS,
          data: context,
        });
        return { admitted: false, reason: 'rate_limited', retryAfterSeconds };
      }
      const delay = await this.limiter.delayFor(username);
      if (delay > 0) await sleep(delay);
    }

    const proof = await this.prove(credential, user, source);
    if (proof === 'busy') return { admitted: false, reason: 'busy', retryAfterSeconds: 1 };
    if (!user || !proof.proven) {
      if (limited) await this.limiter.recordFailure(keys, username);
      const what = credential.kind === 'ssh_key' ? 'key signature' : 'password';
      await this.bus.emit({
        type: `auth.${channel}.failed`,
        level: 'warn',
        message: named
          ? `${label} failed for ${named}: wrong ${what}`
          : `${label} failed: no account has the username given (not kept: it may be a mistyped password)`,
        actor: ANONYMOUS,
        userId: user?.id ?? null,
        data: { ...context, reason: 'invalid_credentials' },
      });
      return { admitted: false, reason: 'invalid_credentials' };
    }
    if (limited) await this.limiter.recordSuccess(username, source);

    const refusal =
      user.status === 'disabled' ? 'account_disabled' : isExpired(user) ? 'account_expired' : null;
    if (refusal) {
      await this.bus.emit({
        type: `auth.${channel}.failed`,
        level: 'warn',
        message: `${label} refused for ${user.username}: ${refusal.replace('_', ' ')}`,
        actor: actorOf(user),
        userId: user.id,
        data: { ...context, username: user.username, reason: refusal },
      });
      return { admitted: false, reason: refusal };
    }
    return { admitted: true, user, ticket: proof.ticket };
  }

  /**
   * An account's own password, as a password change asks for it: checked like a login's (the same rate limits
   * and bounded queue of checks, a failure counted against the account and the address), so wrong old
   * passwords cannot stall everyone's logins. Null when it is right.
   */
  async checkOwnPassword(user: UserRow, password: string, clientAddress: string): Promise<Refusal | null> {
    const source = this.sourceOf(clientAddress);
    const keys = FailureRateLimiter.keysFor(user.username, source);
    const retryAfterSeconds = await this.limiter.retryAfterSeconds(keys);
    if (retryAfterSeconds > 0) return { reason: 'rate_limited', retryAfterSeconds };
    const delay = await this.limiter.delayFor(user.username);
    if (delay > 0) await sleep(delay);
    const proven = await this.boundedCheck(source, () => verifyPassword(password, user.password_hash));
    if (proven === 'busy') return { reason: 'busy', retryAfterSeconds: 1 };
    if (!proven) {
      await this.limiter.recordFailure(keys, user.username);
      return { reason: 'invalid_credentials' };
    }
    return null;
  }

  /** `admit` for the HTTP channels: the user, or the refusal as the API error. */
  async verify(credential: Credential, channel: Channel, clientAddress: string): Promise<UserRow> {
    const admission = await this.admitAccount(credential, channel, clientAddress);
    if (admission.admitted) return admission.user;
    throw refusalError(admission);
  }

  /** Whether `username` registered the key (OpenSSH asks before it signs; other keys are declined, not failures). */
  async ownsKey(username: string, fingerprint: string): Promise<boolean> {
    const user = await this.users.findByUsername(username);
    return (
      user !== undefined &&
      (await this.sshKeys.listForUser(user.id)).some((k) => k.fingerprint === fingerprint)
    );
  }

  /** The host behind an entry short link. Unknown IDs are 404 and count against the caller's address like a
   * wrong password, so short IDs cannot be enumerated. */
  async hostByShortId(shortId: string, clientAddress: string): Promise<HostWithOwner> {
    const addressKeys = FailureRateLimiter.addressKeys(this.sourceOf(clientAddress));
    const retryAfterSeconds = await this.limiter.retryAfterSeconds(addressKeys);
    if (retryAfterSeconds > 0) throw errors.rateLimited(retryAfterSeconds);
    const host = SHORT_ID_PATTERN.test(shortId) ? await this.hosts.findByShortId(shortId) : undefined;
    if (!host) {
      await this.limiter.recordFailure(addressKeys);
      throw errors.notFound('Host');
    }
    return host;
  }

  /**
   * The grant to do `action` to a host the principal may act on; anything else is "not found", so host ids
   * cannot be probed. Every host-scoped method of the domain takes what this returns, never a bare id.
   */
  async requireHost(principal: Principal, hostId: string, action: HostAction): Promise<HostGrant> {
    const host = await this.hosts.findById(hostId);
    if (!host || !mayActOn(principal, host, action)) throw errors.notFound('Host');
    return mint<HostGrant>({ host, action, actor: principalActor(principal) }, 'host');
  }

  /** A task the principal may read: any for an admin, a user's own (queued for them or their hosts). */
  async requireTask(principal: Principal, taskId: string): Promise<TaskGrant> {
    const task = await this.tasks.findById(taskId);
    if (
      !task ||
      !(principal.role === 'admin' || (principal.role === 'user' && task.user_id === principal.id))
    )
      throw errors.notFound('Task');
    return mint<TaskGrant>({ task, actor: principalActor(principal) }, 'task');
  }

  /** The gateway's own work, which no caller asked for: a reconcile, an expiry, a health round. */
  system(reason: string): SystemGrant {
    return mint<SystemGrant>({ reason, actor: systemActor }, 'system');
  }

  /** A grant to manage one host for the gateway's own work (`system`): the host as it is now, or "not found". */
  async hostForSystem(system: SystemGrant, hostId: string): Promise<HostGrant> {
    const host = await this.hosts.findById(hostId);
    if (!host) throw errors.notFound('Host');
    return mint<HostGrant>({ host, action: 'manage', actor: system.actor }, 'host');
  }

  /** The host an SSH login names (`user+shortId`, or the user's only host), or why there is none. */
  async sshHost(user: Principal, shortId: string | null, ticket: TicketGrant | null): Promise<SshHost> {
    let host: HostWithOwner | undefined;
    if (shortId) {
      if (SHORT_ID_PATTERN.test(shortId)) host = await this.hosts.findByShortId(shortId);
      if (!host || !mayActOn(user, host, 'ssh'))
        return { ok: false, reason: 'unknown_host', message: `${user.username} has no host ${shortId}.` };
    } else {
      const owned = await this.hosts.list({ userId: user.id });
      if (owned.length === 0)
        return { ok: false, reason: 'no_host', message: `${user.username} has no host.` };
      if (owned.length > 1) {
        const names = owned.map((h) => `${user.username}+${h.short_id}`).join(', ');
        return {
          ok: false,
          reason: 'host_ambiguous',
          message: `${user.username} has several hosts; log in as one of: ${names}.`,
        };
      }
      host = owned[0]!;
    }
    if (ticket && ticket.hostId !== host.id)
      return {
        ok: false,
        reason: 'ticket_wrong_host',
        message: `this one-time ticket is for another host than ${host.short_id}.`,
        host: hostAccessOf(host),
      };
    return { ok: true, host: hostAccessOf(host), workspaceKey: this.workspaceKeyFor(host) };
  }

  /** The host of a desktop the principal may use (`requireHost` with `desktop`), as the desktop proxy sees it. */
  async desktopHost(principal: Principal, hostId: string): Promise<HostAccess> {
    return hostAccessOf((await this.requireHost(principal, hostId, 'desktop')).host);
  }

  private sourceOf(clientAddress: string): string {
    return limitedSource(clientAddress, this.limits.ipv6PrefixBits);
  }

  /** Whether the host has an egress IP bound, so that it can start at all. */
  async canStart(hostId: string): Promise<boolean> {
    return ((await this.hosts.bindings([hostId])).get(hostId)?.length ?? 0) > 0;
  }

  /**
   * Whom a credential issued for (`userId`, `tokenVersion`, `role`) stands for now: it dies when the account is
   * deleted, disabled or expired, changes role, or its token version moved on (a password change or rotation).
   */
  async holder(userId: string, tokenVersion: unknown, role: unknown): Promise<CredentialHolder> {
    const user = await this.users.findTokenState(userId);
    if (!user || user.token_version !== tokenVersion || user.role !== role)
      throw errors.unauthorized('The token has been revoked');
    if (user.status === 'disabled') throw errors.unauthorized('The account is disabled');
    if (isExpired(user)) throw errors.unauthorized('The account has expired');
    return { id: user.id, username: user.username, role: user.role, tokenVersion: user.token_version };
  }

  /**
   * A one-time ticket to the desktop of a running host, on the caller's portal, so that the page a browser opens
   * carries this in its address instead of the API token.
   */
  async desktopTicket(
    principal: Principal,
    hostId: string,
  ): Promise<{ ticket: string; expiresAt: Date; host: HostAccess }> {
    const { host } = await this.requireHost(principal, hostId, 'desktop');
    if (host.status !== 'running')
      throw errors.conflict('host_not_running', 'The host is not running; start it before its desktop');
    // The caller's token was checked against this version moments ago; the ticket dies when it moves on.
    const account = await this.users.findTokenState(principal.id);
    if (!account) throw errors.unauthorized('The token has been revoked');
    const issued = await this.desktopTickets.issue({
      userId: principal.id,
      hostId: host.id,
      portal: principal.role,
      tokenVersion: account.token_version,
    });
    return { ...issued, host: hostAccessOf(host) };
  }

  /** Uses up a desktop ticket presented on `portal`'s path to `hostId`'s desktop: whom it was made for, while
   * their account is as it was then. A ticket presented anywhere else is used up all the same. */
  async redeemDesktopTicket(ticket: string, portal: Role, hostId: string): Promise<CredentialHolder> {
    const grant = await this.desktopTickets.redeem(ticket);
    if (!grant || grant.hostId !== hostId || grant.portal !== portal)
      throw errors.unauthorized(
        'The desktop ticket is unknown, used, expired or for another desktop: open the desktop again',
      );
    return this.holder(grant.userId, grant.tokenVersion, grant.portal);
  }

  /**
   * A one-time ticket to a browser terminal on a running host, on the caller's portal: the WebSocket's address
   * carries it instead of the API token (a browser cannot set headers on a WebSocket).
   */
  async terminalTicket(
    principal: Principal,
    hostId: string,
    request: TerminalRequest,
  ): Promise<{ ticket: string; expiresAt: Date; host: HostAccess }> {
    const { host } = await this.requireHost(principal, hostId, 'terminal');
    if (host.status !== 'running')
      throw errors.conflict('host_not_running', 'The host is not running; start it before its terminal');
    const account = await this.users.findTokenState(principal.id);
    if (!account) throw errors.unauthorized('The token has been revoked');
    const issued = await this.terminalTickets.issue({
      ...request,
      userId: principal.id,
      hostId: host.id,
      portal: principal.role,
      tokenVersion: account.token_version,
    });
    return { ...issued, host: hostAccessOf(host) };
  }

  /** The host of a terminal grant, as the web terminal reaches it, with the gateway's key for its workspace. */
  terminalLogin(grant: HostGrant): WorkspaceLogin {
    const host = hostOf(grant, 'terminal');
    return { host: hostAccessOf(host), workspaceKey: this.workspaceKeyFor(host) };
  }

  /** A host's workspace login for the port share proxy, which admitted the visitor to one of its shares. */
  async shareLogin(hostId: string): Promise<WorkspaceLogin> {
    const host = await this.hosts.findById(hostId);
    if (!host) throw errors.notFound('Host');
    return { host: hostAccessOf(host), workspaceKey: this.workspaceKeyFor(host) };
  }

  /** Uses up a terminal ticket presented on `portal`'s path to `hostId`'s terminal: whom it was made for (while
   * their account is as it was then) and the session it asked for. Presented anywhere else, it is used up all
   * the same, and refused. */
  async redeemTerminalTicket(
    ticket: string,
    portal: Role,
    hostId: string,
  ): Promise<{ holder: CredentialHolder; request: TerminalRequest }> {
    const grant = await this.terminalTickets.redeem(ticket);
    if (!grant || grant.hostId !== hostId || grant.portal !== portal)
      throw errors.unauthorized(
        'The terminal ticket is unknown, used, expired or for another terminal: ask for a new one ' +
          '(POST …/terminal/ticket)',
      );
    const { session, mode, cols, rows } = grant;
    return {
      holder: await this.holder(grant.userId, grant.tokenVersion, grant.portal),
      request: { session, mode, cols, rows },
    };
  }

  /**
   * The VNC password of a host's desktop. The workspace's VNC server asks for it and the gateway's proxy answers
   * (browsers never see it), so what else reaches the relay cannot use the desktop. Derived from the secret key:
   * nothing to store, and the same on every gateway sharing the key. VNC authentication uses 8 characters.
   */
  desktopPassword(hostId: string): string {
    return desktopPasswordOf(this.box, hostId);
  }

  /** The gateway's own key for logging in to a host's workspace; null before the host was first started. */
  private workspaceKeyFor(host: HostWithOwner): string | null {
    return host.gateway_key_sealed ? this.box.open(host.gateway_key_sealed) : null;
  }

  /**
   * Why a live session (SSH, desktop) opened by `userId` with the token version it had then must end now, or
   * null. Catches what no revocation reached this gateway for (another gateway's change, a lost notice).
   */
  async liveSessionEnd(
    userId: string,
    hostId: string,
    tokenVersion: number,
  ): Promise<'user_revoked' | 'user_credentials_changed' | 'host_stopped' | null> {
    const user = await this.users.findById(userId);
    const reason = sessionEndReason(user, await this.hosts.findById(hostId));
    if (reason) return reason;
    return user!.token_version === tokenVersion ? null : 'user_credentials_changed';
  }

  private async prove(
    credential: Credential,
    user: UserRow | undefined,
    source: string,
  ): Promise<{ proven: boolean; ticket: TicketGrant | null } | 'busy'> {
    switch (credential.kind) {
      case 'password': {
        const password = credential.password;
        const proven = await this.boundedCheck(source, () =>
          user ? verifyPassword(password, user.password_hash) : verifyAgainstNothing(password),
        );
        return proven === 'busy' ? 'busy' : { proven, ticket: null };
      }
      case 'ssh_password': {
        if (AccessTickets.looksLikeTicket(credential.password)) {
          const ticket = await this.tickets.redeem(credential.password);
          return { proven: user !== undefined && ticket?.userId === user.id, ticket };
        }
        // Unknown users still cost one comparison, so timing does not tell which usernames exist.
        const expected = user ? this.box.open(user.ssh_pass_sealed) : randomUUID();
        if (timingSafeEqual(digest(credential.password), digest(expected)))
          return { proven: true, ticket: null };
        // One password for everything: SSH also takes the login password (ssh_pass stays for tools that store one).
        const password = credential.password;
        const proven = await this.boundedCheck(source, () =>
          user ? verifyPassword(password, user.password_hash) : verifyAgainstNothing(password),
        );
        return proven === 'busy' ? 'busy' : { proven, ticket: null };
      }
      case 'ssh_key':
        return {
          proven: credential.signed && (await this.ownsKey(credential.username, credential.fingerprint)),
          ticket: null,
        };
      default:
        return { proven: false, ticket: null };
    }
  }

  /** Runs one password check unless the caller's address, or everyone, already has as many waiting as allowed:
   * a burst from one address is answered 429 at once instead of stalling every other login behind it. */
  private async boundedCheck(source: string, check: () => Promise<boolean>): Promise<boolean | 'busy'> {
    const mine = this.checking.get(source) ?? 0;
    if (mine >= this.limits.checksPerAddress || this.checkingInAll >= this.limits.checksInAll) return 'busy';
    this.checking.set(source, mine + 1);
    this.checkingInAll += 1;
    try {
      return await check();
    } finally {
      this.checkingInAll -= 1;
      const left = (this.checking.get(source) ?? 1) - 1;
      if (left > 0) this.checking.set(source, left);
      else this.checking.delete(source);
    }
  }
}

function mayActOn(principal: Principal, host: HostWithOwner, action: HostAction): boolean {
  // An SSH login becomes the owner's Linux user in the workspace: nobody else's, admins included.
  if (action === 'ssh') return host.user_id === principal.id;
  if (principal.role === 'admin') return true;
  return principal.role === 'user' && host.user_id === principal.id && USER_HOST_ACTIONS.has(action);
}

/** `Access.desktopPassword`, for whoever holds the secret key (the VNC bench's direct path). */
export const desktopPasswordOf = (box: SecretBox, hostId: string): string =>
  box.derive(`desktop vnc password ${hostId}`, 6).toString('base64url');

const holderOf = (user: UserRow): CredentialHolder => ({
  id: user.id,
  username: user.username,
  role: user.role,
  tokenVersion: user.token_version,
});

/** The principal an admitted account acts as. */
export const principalOf = (user: UserRow): Principal => ({
  id: user.id,
  username: user.username,
  role: user.role,
});

/** The API error for a refusal. */
export function refusalError(refusal: Refusal): DomainError {
  switch (refusal.reason) {
    case 'rate_limited':
      return errors.rateLimited(refusal.retryAfterSeconds);
    case 'busy':
      return errors.busy(refusal.retryAfterSeconds);
    case 'account_disabled':
      return errors.accountDisabled();
    case 'account_expired':
      return errors.accountExpired();
    default:
      return errors.invalidCredentials();
  }
}
