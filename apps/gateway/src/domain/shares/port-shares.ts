import { createHash, createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import type {
  ListeningPort,
  PortShare,
  PortShareCreate,
  PortShareCreated,
  PortShareTicket,
  ReceivedPortShare,
} from '@ccp/api';
import type { EventBus } from '../../events/event-bus.js';
import { isoOut } from '../../shared/clock.js';
import type { AccessTicketsRepository } from '../../store/access-tickets-repository.js';
import type { HostsRepository, HostWithOwner } from '../../store/hosts-repository.js';
import type { PortShareRow, PortSharesRepository } from '../../store/port-shares-repository.js';
import type { UsersRepository } from '../../store/users-repository.js';
import type { Access, WorkspaceLogin } from '../access/access.js';
import { AccessTickets, type TicketGrant } from '../access/access-tickets.js';
import { isExpired } from '../access/account-expiry.js';
import { type HostGrant, hostOf } from '../access/grants.js';
import { type HostAccess, hostAccessOf } from '../access/host-access.js';
import { actorOf, type CredentialHolder, type Principal } from '../access/principal.js';
import type { SecretBox } from '../access/secret-box.js';
import { errors } from '../errors.js';
import type { ShareSettings } from './settings.js';
import { parseListeningPorts, shareablePort } from './shareable-port.js';

/** The reserved path on a share's origin where a ticket or a link is traded for the share's cookie. */
export const SHARE_ENTRY_PATH = '/.ccp-share/enter';
/** Every cookie of the gateway's shares starts so; the proxy takes them out of what reaches the workspace. */
export const SHARE_COOKIE_PREFIX = 'ccp_share_';
/** A visitor's pass lasts this long at most; a link's ends sooner with the link. */
const PASS_MS = 12 * 3600_000;
const TICKET_MS = 60_000;

interface ShareTicketGrant extends TicketGrant {
  shareId: string;
  role: Principal['role'];
  tokenVersion: number;
}

/** Who holds a share's pass: a signed-in user (as their account was then) or a link (as it is still). */
type PassSubject =
  | { kind: 'user'; userId: string; tokenVersion: number; role: string }
  | { kind: 'link'; link: string };

interface PassBody {
  share: string;
  subject: PassSubject;
  expires: number;
}

/** A visitor let through to a share now: what the proxy relays for, rechecked for each request. */
export interface ShareVisit {
  share: PortShareRow;
  host: HostAccess;
  /** The pass, to check again while a WebSocket stays open. */
  pass: string;
  visitor: string;
  expiresAt: number;
}

export interface PortSharesOptions {
  shares: PortSharesRepository;
  hosts: HostsRepository;
  users: UsersRepository;
  tickets: AccessTicketsRepository;
  access: Access;
  box: SecretBox;
  bus: EventBus;
  settings: ShareSettings;
  /** The origin a share is served on (SHARE_DOMAIN or SHARE_PORTS), from the composition root. */
  originOf: (share: Pick<PortShareRow, 'label' | 'listen_port'>) => string;
  /** Runs the listing of /proc/net/tcp in the workspace (HostDialer.exec); null when it is not running. */
  listPorts: (host: HostAccess) => Promise<string | null>;
  now?: () => number;
}

const linkDigest = (secret: string) => createHash('sha256').update(secret, 'utf8').digest('base64url');

/**
 * Ports of workspaces shared through the gateway: private to the owner (and admins) by default, shared with named
 * signed-in users or by a link that expires; each served on an origin of its own. A visitor proves access once
 * (a one-time ticket or the link) and gets a pass for that one share; every request checks the pass against the
 * share as it is now, so a revocation or an expiry ends access at once.
 */
export class PortShares {
  private readonly tickets: AccessTickets<ShareTicketGrant>;
  private readonly key: Buffer;
  private readonly now: () => number;

  constructor(private readonly options: PortSharesOptions) {
    this.tickets = new AccessTickets<ShareTicketGrant>(options.tickets, 'share', TICKET_MS);
    this.key = options.box.derive('port share pass');
    this.now = options.now ?? (() => Date.now());
  }

  get enabled(): boolean {
    return this.options.settings.domain !== null || this.options.settings.ports !== null;
  }

  /** The shareable ports the workspace listens on now. */
  async listeningPorts(grant: HostGrant): Promise<ListeningPort[]> {
    const host = hostAccessOf(hostOf(grant, 'view'));
    if (host.status !== 'running')
      throw errors.conflict('host_not_running', 'The host is not running; start it to see its ports');
    const text = await this.options.listPorts(host);
    if (text === null)
      throw errors.conflict('host_not_running', 'The host is not running; start it to see its ports');
    return parseListeningPorts(text);
  }

  async list(grant: HostGrant): Promise<PortShare[]> {
    const host = hostOf(grant, 'view');
    return Promise.all((await this.options.shares.listByHost(host.id)).map((row) => this.view(row)));
  }

  /**
   * The shares other users shared with `principal` by username: those of an owner who is disabled or expired are
   * left out (their hosts are closed to everyone but admins), a revoked share or a removed host's is gone.
   */
  async sharedWith(principal: Principal): Promise<ReceivedPortShare[]> {
    const now = new Date(this.now()).toISOString();
    return (await this.options.shares.listSharedWith(principal.id))
      .filter(
        (row) =>
          (JSON.parse(row.user_ids) as string[]).includes(principal.id) &&
          row.owner_status === 'active' &&
          !isExpired({ expires_at: row.owner_expires_at }, now),
      )
      .map((row) => ({
        id: row.id,
        host_short_id: row.host_short_id,
        owner_username: row.owner_username,
        port: row.port,
        origin: this.options.originOf(row),
        created_at: isoOut(row.created_at),
      }));
  }

  /** Shares a port of the host: 409 when sharing is off or the host has as many as it may. */
  async create(grant: HostGrant, principal: Principal, body: PortShareCreate): Promise<PortShareCreated> {
    const host = hostOf(grant, 'operate');
    const { settings } = this.options;
    if (!this.enabled)
      throw errors.conflict(
        'sharing_off',
        'Port sharing is off on this gateway: its operator sets SHARE_PORTS (or SHARE_DOMAIN) to turn it on',
      );
    if (!shareablePort(body.port))
      throw errors.validation(
        [{ field: 'port', message: 'must be 1024–65535 and not the desktop (5900–5999, 6080)' }],
        `Port ${body.port} cannot be shared`,
      );
    const existing = await this.options.shares.listByHost(host.id);
    if (existing.length >= settings.perHost)
      throw errors.conflict(
        'too_many_shares',
        `Host ${host.short_id} has ${settings.perHost} shared ports, the most one host may have; revoke one first`,
        { limit: settings.perHost },
      );
    const userIds: string[] = [];
    for (const username of new Set(body.usernames ?? [])) {
      const user = await this.options.users.findByUsername(username);
      if (!user)
        throw errors.validation(
          [{ field: 'usernames', message: `no user ${username}` }],
          `No user ${username}`,
        );
      if (user.id !== host.user_id) userIds.push(user.id);
    }
    let link: string | null = null;
    let linkExpiresAt: string | null = null;
    if (body.link_expires_in_seconds !== undefined) {
      if (body.link_expires_in_seconds > settings.linkMaxSeconds)
        throw errors.validation(
          [{ field: 'link_expires_in_seconds', message: `must be at most ${settings.linkMaxSeconds}` }],
          `A share link lasts at most ${settings.linkMaxSeconds / 3600} hours on this gateway`,
        );
      link = `ccps_${randomBytes(24).toString('base64url')}`;
      linkExpiresAt = new Date(this.now() + body.link_expires_in_seconds * 1000).toISOString();
    }
    const listenPort = settings.domain ? null : await this.freeListenPort();
    const row: PortShareRow = {
      id: randomUUID(),
      host_id: host.id,
      port: body.port,
      label: randomLabel(),
      listen_port: listenPort,
      user_ids: JSON.stringify(userIds),
      link_digest: link ? linkDigest(link) : null,
      link_expires_at: linkExpiresAt,
      created_by: principal.id,
      created_at: new Date(this.now()).toISOString(),
    };
    await this.options.shares.insert(row);
    const usernames = [...new Set(body.usernames ?? [])].filter((name) => name !== host.username);
    await this.options.bus.emit({
      type: 'port_share.created',
      message: `Port ${row.port} of host ${host.short_id} shared at ${this.options.originOf(row)}${usernames.length ? ` with ${usernames.join(', ')}` : ''}${link ? ', with a link' : ''}`,
      actor: actorOf(principal),
      userId: host.user_id,
      hostId: host.id,
      data: { ...this.eventData(row, host), usernames, link: link !== null },
    });
    const view = await this.view(row);
    return { ...view, link_url: link ? `${view.origin}${SHARE_ENTRY_PATH}?link=${link}` : null };
  }

  /** Ends a share at once: its passes and links stop opening it, on every gateway. */
  async revoke(grant: HostGrant, principal: Principal, shareId: string): Promise<void> {
    const host = hostOf(grant, 'operate');
    const row = await this.options.shares.findById(shareId);
    if (!row || row.host_id !== host.id) throw errors.notFound('Share');
    await this.options.shares.delete(row.id);
    await this.options.bus.emit({
      type: 'port_share.revoked',
      message: `Share of port ${row.port} of host ${host.short_id} revoked`,
      actor: actorOf(principal),
      userId: host.user_id,
      hostId: host.id,
      data: this.eventData(row, host),
    });
  }

  /**
   * A one-time entry to a share for a signed-in user who may open it (the owner, an admin, or a user it is shared
   * with); "not found" for anyone else, so share ids cannot be probed.
   */
  async ticket(principal: Principal, shareId: string): Promise<PortShareTicket> {
    const row = await this.options.shares.findById(shareId);
    const host = row ? await this.options.hosts.findById(row.host_id) : undefined;
    if (!row || !host || !mayOpen(principal, row, host)) throw errors.notFound('Share');
    const account = await this.options.users.findTokenState(principal.id);
    if (!account) throw errors.unauthorized('The token has been revoked');
    const { ticket, expiresAt } = await this.tickets.issue({
      userId: principal.id,
      hostId: host.id,
      shareId: row.id,
      role: principal.role,
      tokenVersion: account.token_version,
    });
    return {
      url: `${this.options.originOf(row)}${SHARE_ENTRY_PATH}?ticket=${ticket}`,
      expires_at: isoOut(expiresAt.toISOString()),
    };
  }

  /** The share served at a SHARE_PORTS port or under a SHARE_DOMAIN label; undefined for none. */
  findServed(where: { listenPort: number } | { label: string }): Promise<PortShareRow | undefined> {
    return 'label' in where
      ? this.options.shares.findByLabel(where.label)
      : this.options.shares.findByListenPort(where.listenPort);
  }

  /**
   * Trades a ticket or a link presented at a share's entry for a pass to that share alone; 401 for one that is
   * unknown, used, expired, revoked or for another share.
   */
  async enter(
    share: PortShareRow,
    presented: { ticket: string } | { link: string },
    clientAddress: string,
  ): Promise<{ pass: string; maxAgeSeconds: number }> {
    let subject: PassSubject;
    let expires = this.now() + PASS_MS;
    if ('ticket' in presented) {
      const grant = await this.tickets.redeem(presented.ticket);
      if (!grant || grant.shareId !== share.id)
        throw errors.unauthorized(
          'The share ticket is unknown, used, expired or for another share: open the share again',
        );
      subject = { kind: 'user', userId: grant.userId, tokenVersion: grant.tokenVersion, role: grant.role };
    } else {
      const digest = linkDigest(presented.link);
      if (!share.link_digest || !sameText(digest, share.link_digest) || this.linkExpired(share))
        throw errors.unauthorized('The share link is not valid: it expired or was revoked');
      subject = { kind: 'link', link: digest.slice(0, 16) };
      expires = Math.min(expires, Date.parse(share.link_expires_at!));
    }
    const pass = this.sign({ share: share.id, subject, expires });
    const visit = await this.admit(share, pass);
    const host = visit.host;
    await this.options.bus.emit({
      type: 'port_share.opened',
      message: `${visit.visitor} opened the share of port ${share.port} of host ${host.shortId}`,
      actor:
        subject.kind === 'user'
          ? { kind: subject.role as Principal['role'], id: subject.userId, username: visit.visitor }
          : { kind: 'anonymous', id: null, username: null },
      userId: host.ownerId,
      hostId: host.id,
      data: {
        ...this.eventData(share, host),
        via: 'ticket' in presented ? 'ticket' : 'link',
        client_address: clientAddress,
      },
    });
    return { pass, maxAgeSeconds: Math.max(1, Math.floor((expires - this.now()) / 1000)) };
  }

  /**
   * A visitor's pass to `share`, checked against the share and its holder as they are now; 401 when it is not
   * good (any more).
   */
  async admit(share: PortShareRow, pass: string): Promise<ShareVisit> {
    const body = this.verify(pass);
    if (!body || body.share !== share.id) throw errors.unauthorized('No pass for this share');
    if (body.expires <= this.now()) throw errors.unauthorized('The pass for this share has expired');
    const current = await this.options.shares.findById(share.id);
    if (!current) throw errors.unauthorized('This share was revoked');
    const host = await this.options.hosts.findById(current.host_id);
    if (!host) throw errors.unauthorized('This share was revoked');
    let visitor: string;
    if (body.subject.kind === 'user') {
      const holder: CredentialHolder = await this.options.access.holder(
        body.subject.userId,
        body.subject.tokenVersion,
        body.subject.role,
      );
      if (!mayOpen(holder, current, host))
        throw errors.unauthorized('This share is no longer shared with you');
      visitor = holder.username;
    } else {
      if (!current.link_digest?.startsWith(body.subject.link) || this.linkExpired(current))
        throw errors.unauthorized('The share link expired or was revoked');
      visitor = 'a link holder';
    }
    return { share: current, host: hostAccessOf(host), pass, visitor, expiresAt: body.expires };
  }

  /** The login the proxy dials the workspace with (the gateway's key for the host, as the browser terminal). */
  workspaceLogin(visit: ShareVisit): Promise<WorkspaceLogin> {
    return this.options.access.shareLogin(visit.host.id);
  }

  /** The origin a share is served on. */
  originOf(share: PortShareRow): string {
    return this.options.originOf(share);
  }

  /** Shares held now, for /metrics. */
  async count(): Promise<number> {
    return this.options.shares.count();
  }

  private linkExpired(share: PortShareRow): boolean {
    return !share.link_expires_at || Date.parse(share.link_expires_at) <= this.now();
  }

  private async freeListenPort(): Promise<number> {
    const { ports } = this.options.settings;
    if (!ports) throw errors.conflict('sharing_off', 'Port sharing is off on this gateway');
    const used = new Set(await this.options.shares.listenPortsInUse());
    for (let port = ports.first; port <= ports.last; port++) if (!used.has(port)) return port;
    throw errors.conflict(
      'share_ports_full',
      `Every port of SHARE_PORTS (${ports.first}-${ports.last}) serves a share; revoke one, or the operator widens the range`,
    );
  }

  private async view(row: PortShareRow): Promise<PortShare> {
    const usernames: string[] = [];
    for (const id of JSON.parse(row.user_ids) as string[]) {
      const user = await this.options.users.findById(id);
      if (user) usernames.push(user.username);
    }
    return {
      id: row.id,
      host_id: row.host_id,
      port: row.port,
      label: row.label,
      origin: this.options.originOf(row),
      usernames,
      link_expires_at: row.link_digest ? isoOut(row.link_expires_at) : null,
      created_at: isoOut(row.created_at),
    };
  }

  private eventData(row: PortShareRow, host: HostWithOwner | HostAccess) {
    return {
      share_id: row.id,
      short_id: 'shortId' in host ? host.shortId : host.short_id,
      port: row.port,
      label: row.label,
    };
  }

  private sign(body: PassBody): string {
    const text = Buffer.from(JSON.stringify(body)).toString('base64url');
    return `${text}.${createHmac('sha256', this.key).update(text).digest('base64url')}`;
  }

  private verify(pass: string): PassBody | null {
    const [text, mac, rest] = pass.split('.');
    if (!text || !mac || rest !== undefined || pass.length > 2048) return null;
    const expected = createHmac('sha256', this.key).update(text).digest('base64url');
    if (!sameText(mac, expected)) return null;
    try {
      return JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as PassBody;
    } catch {
      return null;
    }
  }
}

/** The owner, an admin, or a user the share names. */
function mayOpen(principal: Principal, share: PortShareRow, host: HostWithOwner): boolean {
  if (principal.role === 'admin' || host.user_id === principal.id) return true;
  return (JSON.parse(share.user_ids) as string[]).includes(principal.id);
}

function sameText(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/** A DNS label and cookie name: 12 lowercase letters and digits, starting with a letter. */
function randomLabel(): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  const bytes = randomBytes(12);
  let label = 's';
  for (let i = 1; i < 12; i++) label += alphabet[bytes[i]! % alphabet.length];
  return label;
}
