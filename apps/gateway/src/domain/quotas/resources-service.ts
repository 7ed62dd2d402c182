import type {
  Actor,
  Host,
  HostResources,
  HostResourcesRequest,
  Quotas,
  ResourceDefaults,
  UserResources,
  UserResourcesRequest,
} from '@ccp/api';
import type { EventBus } from '../../events/event-bus.js';
import { RuntimeError, type WorkspaceRuntime } from '../../runtime/workspace-runtime.js';
import { nowIso } from '../../shared/clock.js';
import type { HostsRepository, HostWithOwner } from '../../store/hosts-repository.js';
import type { TasksRepository } from '../../store/tasks-repository.js';
import type { QuotaScope, UserQuotaLock } from '../../store/user-quota-lock.js';
import type { UserRow, UsersRepository } from '../../store/users-repository.js';
import { type HostGrant, hostOf } from '../access/grants.js';
import { errors } from '../errors.js';
import { type AccessSettings, adminHostView } from '../hosts/host-view.js';
import { alertsOf, hostOverrides, LIVE_STATUSES, resourcesOf, workspaceLimits } from './host-resources.js';
import {
  type CountedHost,
  describeExcess,
  effectiveResources,
  newHostDelta,
  type QuotaDelta,
  type QuotaExcess,
  quotaExcess,
  quotaUse,
  resizeDelta,
  startDelta,
} from './quota-arithmetic.js';

const defaultsOf = (user: UserRow): ResourceDefaults => ({
  cpus: user.default_cpus,
  memory_mb: user.default_memory_mb,
  pids: user.default_pids,
  home_mb: user.default_home_mb,
});

const quotasOf = (user: UserRow): Quotas => ({
  hosts: user.quota_hosts,
  running_hosts: user.quota_running_hosts,
  cpus: user.quota_cpus,
  memory_mb: user.quota_memory_mb,
  home_mb: user.quota_home_mb,
});

/**
 * Resources of hosts and quotas of users: what a host runs with, what a user's hosts take of each quota, and
 * the refusal (409 `quota_exceeded`) of a creation, start or resize that would pass one.
 */
export class ResourcesService {
  constructor(
    private readonly hosts: HostsRepository,
    private readonly users: UsersRepository,
    private readonly quotaLock: UserQuotaLock,
    private readonly runtime: WorkspaceRuntime,
    private readonly bus: EventBus,
    private readonly access: AccessSettings,
    /** The gateway's resources of a host with none of its own and none from its owner (WORKSPACE_CPUS, ...). */
    private readonly global: HostResources,
  ) {}

  /** The limits a host's workspace is made and started with. */
  limitsOf(host: HostWithOwner) {
    return workspaceLimits(resourcesOf(host, this.global));
  }

  /** What a new host of this user would run with, given its own values. */
  async resourcesForNewHost(userId: string, own: HostResourcesRequest = {}): Promise<HostResources> {
    const user = await this.requireUser(userId);
    return effectiveResources(
      { cpus: null, memory_mb: null, pids: null, home_mb: null, ...own },
      defaultsOf(user),
      this.global,
    );
  }

  /**
   * Refuses a new host past the user's quotas of hosts or home; `insert` writes the host's row (with the
   * repository given, when the check holds the user's quota lock), so simultaneous creations are judged in turn.
   */
  async admitNewHost(
    userId: string,
    resources: HostResources,
    actor: Actor,
    insert: (hosts?: HostsRepository) => Promise<void>,
  ): Promise<void> {
    await this.admit(userId, newHostDelta(resources), actor, { hostId: null, counted: 'all' }, (writes) =>
      insert(writes?.hosts),
    );
  }

  /**
   * Refuses a start past the user's quotas of running hosts, CPUs or memory; a host already live passes.
   * `queue` writes the start's task row (with the repository given, when the check holds the user's quota lock):
   * a queued start counts as running for the next check, so of simultaneous starts only those that fit pass.
   * Asked again when the task runs, the host's own task is not counted twice.
   */
  async admitStart<T>(
    host: HostWithOwner,
    actor: Actor,
    queue: (tasks?: TasksRepository) => Promise<T>,
  ): Promise<T> {
    if (LIVE_STATUSES.includes(host.status)) return queue();
    return this.admit(
      host.user_id,
      startDelta(resourcesOf(host, this.global)),
      actor,
      { hostId: host.id, counted: 'others' },
      (writes) => queue(writes?.tasks),
    );
  }

  /**
   * Changes a host's own resources (null: back to the default). A running workspace gets its new memory, CPUs
   * and processes at once, a stopped one keeps them for its next start; a home grows in place and never shrinks.
   */
  async resizeHost(grant: HostGrant, request: HostResourcesRequest): Promise<Host> {
    const host = hostOf(grant, 'manage');
    const before = resourcesOf(host, this.global);
    const own = { ...hostOverrides(host), ...request };
    const after = resourcesOf({ ...host, ...own }, this.global);
    const homeSize = await this.runtime.homeSizeMb(host.id).catch(() => null);
    if (homeSize !== null && after.home_mb < homeSize)
      throw errors.conflict(
        'home_shrink',
        `The home of host ${host.short_id} is ${homeSize} MiB and is never shrunk (its files would not fit); give ${homeSize} MiB or more`,
      );
    const live = LIVE_STATUSES.includes(host.status);
    // The new size is written with the quota check, under the user's lock: a second resize checked meanwhile
    // counts it. The engine's resize comes after; when it fails, the row goes back to what it was.
    await this.admit(
      host.user_id,
      resizeDelta(before, after, live),
      grant.actor,
      { hostId: host.id, counted: 'all' },
      (writes) => (writes?.hosts ?? this.hosts).update(host.id, { ...own, updated_at: nowIso() }),
    );
    let home: 'now' | 'next_start';
    try {
      home = await this.runtime.resize(host.id, workspaceLimits(after));
    } catch (error) {
      await this.hosts.update(host.id, { ...hostOverrides(host), updated_at: nowIso() });
      if (error instanceof RuntimeError && error.code === 'resize_refused')
        throw errors.conflict('resize_refused', `${error.message}; stop the host and try again`);
      throw error;
    }
    const view = await adminHostView(this.hosts, (await this.hosts.findById(host.id))!, this.access);
    await this.bus.emit({
      type: 'host.resources_changed',
      message:
        `host ${host.short_id} resized: ${describe(after)}` +
        (live ? ' (applied to the running workspace' : '') +
        (live && home === 'next_start' ? '; the home grows at its next start)' : live ? ')' : ''),
      actor: grant.actor,
      userId: host.user_id,
      hostId: host.id,
      data: { before, after, running: live, home_grows: home },
      host: view,
    });
    return view;
  }

  /** A user's defaults, quotas and what the user's hosts take of them. */
  async userResources(userId: string): Promise<UserResources> {
    const user = await this.requireUser(userId);
    return this.view(user, await this.hosts.list({ userId }));
  }

  /** Every user's, for the admins' quota page. */
  async listUserResources(): Promise<UserResources[]> {
    const hosts = await this.hosts.list();
    const out: UserResources[] = [];
    for (const listed of await this.users.list()) {
      const user = await this.users.findById(listed.id);
      if (user)
        out.push(
          this.view(
            user,
            hosts.filter((host) => host.user_id === user.id),
          ),
        );
    }
    return out;
  }

  /** What /metrics shows: every user's quotas and use, and how many hosts have each alert now. */
  async metrics(): Promise<{ users: UserResources[]; alerts: Record<string, number> }> {
    const alerts: Record<string, number> = {};
    for (const host of await this.hosts.list())
      for (const alert of alertsOf(host)) alerts[alert.kind] = (alerts[alert.kind] ?? 0) + 1;
    return { users: await this.listUserResources(), alerts };
  }

  /** Changes a user's defaults and quotas; each field given replaces the stored one (null clears it). */
  async setUserResources(
    userId: string,
    request: UserResourcesRequest,
    actor: Actor,
  ): Promise<UserResources> {
    const user = await this.requireUser(userId);
    const patch: Record<string, number | null> = {};
    for (const [key, value] of Object.entries(request.defaults ?? {})) patch[`default_${key}`] = value;
    for (const [key, value] of Object.entries(request.quotas ?? {})) patch[`quota_${key}`] = value;
    const updated = (await this.users.update(user.id, { ...patch, updated_at: nowIso() }))!;
    const view = this.view(updated, await this.hosts.list({ userId }));
    await this.bus.emit({
      type: 'user.resources_changed',
      message: `resources of ${user.username} changed`,
      actor,
      userId: user.id,
      data: { username: user.username, defaults: view.defaults, quotas: view.quotas },
    });
    return view;
  }

  private view(user: UserRow, hosts: HostWithOwner[]): UserResources {
    return {
      user_id: user.id,
      username: user.username,
      defaults: defaultsOf(user),
      quotas: quotasOf(user),
      usage: quotaUse(hosts.map((host) => this.counted(host))),
    };
  }

  private counted(host: HostWithOwner, startsUnderway = new Set<string>()): CountedHost {
    return {
      live: LIVE_STATUSES.includes(host.status) || startsUnderway.has(host.id),
      resources: resourcesOf(host, this.global),
    };
  }

  /**
   * Refuses a change past a quota: 409 `quota_exceeded` naming it, and an event for the admins. Else runs
   * `reserve`, which writes what the change takes; with any quota set, the check and `reserve` hold the user's
   * quota lock (and `reserve` gets the repositories that write inside it). `counted`: whether the host changed
   * counts as it is now (its change is the delta), or only the user's other hosts do.
   */
  private async admit<T>(
    userId: string,
    delta: QuotaDelta,
    actor: Actor,
    change: { hostId: string | null; counted: 'all' | 'others' },
    reserve: (writes?: QuotaScope['writes']) => Promise<T>,
  ): Promise<T> {
    const unlimited = (user: UserRow) => Object.values(quotasOf(user)).every((quota) => quota === null);
    if (unlimited(await this.requireUser(userId))) return reserve();
    const outcome = await this.quotaLock.hold<{ admitted: T } | { excess: QuotaExcess; username: string }>(
      userId,
      async (scope) => {
        if (!scope.user) throw errors.notFound('User');
        if (unlimited(scope.user)) return { admitted: await reserve(scope.writes) };
        const counted = scope.hosts
          .filter((host) => change.counted === 'all' || host.id !== change.hostId)
          .map((host) => this.counted(host, scope.startsUnderway));
        const excess = quotaExcess(quotasOf(scope.user), quotaUse(counted), delta);
        if (excess) return { excess, username: scope.user.username };
        return { admitted: await reserve(scope.writes) };
      },
    );
    if ('admitted' in outcome) return outcome.admitted;
    const { excess, username } = outcome;
    const message = describeExcess(excess, username);
    await this.bus.emit({
      type: 'quota.exceeded',
      level: 'warn',
      message,
      actor,
      userId,
      hostId: change.hostId,
      data: { username, ...excess },
    });
    throw errors.conflict('quota_exceeded', message, { ...excess });
  }

  private async requireUser(userId: string): Promise<UserRow> {
    const user = await this.users.findById(userId);
    if (!user) throw errors.notFound('User');
    return user;
  }
}

function describe(resources: HostResources): string {
  return `${resources.cpus} CPUs, ${resources.memory_mb} MiB memory, ${resources.pids} processes, ${resources.home_mb} MiB home`;
}
