import type { Actor, LifecyclePolicies, LifecyclePolicy, StopReason } from '@ccp/api';
import type { EventBus } from '../../events/event-bus.js';
import { nowIso } from '../../shared/clock.js';
import type { HostsRepository, HostWithOwner } from '../../store/hosts-repository.js';
import type { UsersRepository } from '../../store/users-repository.js';
import { type HostGrant, hostOf } from '../access/grants.js';
import { errors } from '../errors.js';
import { type AccessSettings, adminHostView } from './host-view.js';
import { effectivePolicy, extendedUntil, isTimeZone, plannedStop } from './lifecycle-policy.js';
import type { HostLifecycleSettings } from './lifecycle-scheduler.js';
import { msOf, policyColumns, policyOf } from './lifecycle-state.js';

/** Setting hosts' and users' lifecycle policies, and extending a host's run before a policy stop. */
export class HostPolicies {
  constructor(
    private readonly hosts: HostsRepository,
    private readonly users: Pick<UsersRepository, 'findById' | 'update'>,
    private readonly bus: EventBus,
    private readonly access: AccessSettings,
    private readonly settings: HostLifecycleSettings,
    private readonly now: () => number = Date.now,
  ) {}

  /** The host's policy at each level and the one it follows. */
  ofHost(grant: HostGrant): Promise<LifecyclePolicies> {
    return this.levels(hostOf(grant, 'view'));
  }

  private async levels(host: HostWithOwner): Promise<LifecyclePolicies> {
    const user = await this.users.findById(host.user_id);
    if (!user) throw errors.notFound('User');
    const own = policyOf(host);
    const owner = policyOf(user);
    return {
      host: own,
      user: owner,
      global: this.settings.defaults,
      effective: effectivePolicy(own, owner, this.settings.defaults),
    };
  }

  async setHostPolicy(grant: HostGrant, policy: LifecyclePolicy): Promise<LifecyclePolicies> {
    const host = hostOf(grant, 'manage');
    checkPolicy(policy);
    await this.hosts.update(host.id, { ...policyColumns(policy), updated_at: nowIso() });
    const row = (await this.hosts.findById(host.id))!;
    await this.bus.emit({
      type: 'host.policy_changed',
      message: `lifecycle policy of host ${host.short_id} set`,
      actor: grant.actor,
      userId: host.user_id,
      hostId: host.id,
      data: { policy },
      host: await adminHostView(this.hosts, row, this.access),
    });
    return this.levels(row);
  }

  async userPolicy(userId: string): Promise<LifecyclePolicy> {
    const user = await this.users.findById(userId);
    if (!user) throw errors.notFound('User');
    return policyOf(user);
  }

  async setUserPolicy(userId: string, policy: LifecyclePolicy, actor: Actor): Promise<LifecyclePolicy> {
    const user = await this.users.findById(userId);
    if (!user) throw errors.notFound('User');
    checkPolicy(policy);
    await this.users.update(userId, { ...policyColumns(policy), updated_at: nowIso() });
    await this.bus.emit({
      type: 'user.host_policy_changed',
      message: `default lifecycle policy of ${user.username}'s hosts set`,
      actor,
      userId,
      data: { username: user.username, policy },
    });
    return policy;
  }

  /**
   * Holds the policy's stops off for `seconds` (HOST_EXTEND_SECONDS when not said) past the planned stop, or past
   * now when that is sooner; a warning already given is taken back, so the next approach warns again.
   */
  async extend(grant: HostGrant, seconds?: number): Promise<void> {
    const host = hostOf(grant, 'operate');
    if (host.status !== 'running')
      throw errors.conflict(
        'host_not_running',
        `Host ${host.short_id} is ${host.status}; only a running host's stop can be moved`,
      );
    const user = await this.users.findById(host.user_id);
    const policy = effectivePolicy(
      policyOf(host),
      user ? policyOf(user) : { idle_timeout_seconds: null, max_lifetime_seconds: null, schedule: null },
      this.settings.defaults,
    );
    const now = this.now();
    const shown = msOf(host.planned_stop_at);
    const plan =
      shown !== null && host.planned_stop_reason
        ? { at: shown, reason: host.planned_stop_reason as StopReason }
        : plannedStop(policy, {
            startedAt: msOf(host.started_at) ?? now,
            lastActivityAt: msOf(host.last_activity_at),
            extendedUntil: msOf(host.stop_extended_until),
          });
    const until = new Date(extendedUntil(plan, now, seconds ?? this.settings.extendSeconds)).toISOString();
    await this.hosts.update(host.id, {
      stop_extended_until: until,
      stop_warned_at: null,
      ...(plan ? { planned_stop_at: until } : {}),
    });
    const row = (await this.hosts.findById(host.id))!;
    await this.bus.emit({
      type: 'host.stop_extended',
      message: `host ${host.short_id} kept running: no policy stop before ${until}`,
      actor: grant.actor,
      userId: host.user_id,
      hostId: host.id,
      data: { until },
      host: await adminHostView(this.hosts, row, this.access),
    });
  }
}

/** What the schema cannot say: the time zone must be one this machine knows. */
function checkPolicy(policy: LifecyclePolicy): void {
  if (policy.schedule && !isTimeZone(policy.schedule.time_zone))
    throw errors.validation([
      {
        field: 'schedule.time_zone',
        message: `unknown time zone "${policy.schedule.time_zone}"; use an IANA name such as Europe/Berlin or UTC`,
      },
    ]);
}
