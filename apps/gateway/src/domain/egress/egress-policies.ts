import type { Actor, EgressPolicy, EgressRule, HostEgressPolicies, UserEgressPolicies } from '@ccp/api';
import type { EventBus } from '../../events/event-bus.js';
import { nowIso } from '../../shared/clock.js';
import type { HostsRepository, HostWithOwner } from '../../store/hosts-repository.js';
import type { UsersRepository } from '../../store/users-repository.js';
import { type HostGrant, hostOf } from '../access/grants.js';
import { errors } from '../errors.js';
import { type AccessSettings, adminHostView } from '../hosts/host-view.js';
import { checkPolicy, effectiveEgressPolicy, storedPolicy } from './egress-policy.js';

/** Makes running hosts' egress gateways follow what their records say now (HostLifecycle). */
export interface EgressPolicyApplier {
  applyEgressPolicy(hostId: string, actor: Actor): Promise<void>;
}

/**
 * Hosts' own egress policies and users' defaults for their hosts: read at each level, set and removed by admins,
 * and applied at once to the running hosts they concern.
 */
export class EgressPolicies {
  constructor(
    private readonly hosts: HostsRepository,
    private readonly users: Pick<UsersRepository, 'findById' | 'update'>,
    private readonly bus: EventBus,
    private readonly access: AccessSettings,
    private readonly applier: EgressPolicyApplier,
    /** What the path check reaches from workspaces, allowed before an enforced policy's rules. */
    private readonly alwaysAllowed: EgressRule[],
  ) {}

  /** The host's policy at each level and the one it follows. */
  ofHost(grant: HostGrant): HostEgressPolicies {
    return this.levels(hostOf(grant, 'view'));
  }

  private levels(host: HostWithOwner): HostEgressPolicies {
    const global = this.access.egressPolicyDefault;
    const effective = effectiveEgressPolicy(host, global);
    return {
      host: storedPolicy(host.egress_policy),
      user: storedPolicy(host.owner_egress_policy),
      global,
      effective,
      always_allowed: effective.mode === 'enforce' ? this.alwaysAllowed : [],
    };
  }

  /** Sets the host's own policy (null: its owner's default again); a running host follows it before this returns. */
  async setHostPolicy(grant: HostGrant, policy: EgressPolicy | null): Promise<HostEgressPolicies> {
    const host = hostOf(grant, 'manage');
    if (policy) checkPolicy(policy);
    await this.hosts.update(host.id, {
      egress_policy: policy && JSON.stringify(policy),
      updated_at: nowIso(),
    });
    const row = await this.require(host.id);
    const view = await adminHostView(this.hosts, row, this.access);
    await this.bus.emit({
      type: 'host.egress_policy_changed',
      message: policy
        ? `egress policy of host ${host.short_id} set (${policy.mode}, ${policy.rules.length} rules, default ${policy.default_action})`
        : `own egress policy of host ${host.short_id} removed; it follows its ${view.egress_policy.source === 'none' ? 'owner (none set)' : `${view.egress_policy.source} default`}`,
      actor: grant.actor,
      userId: host.user_id,
      hostId: host.id,
      data: { policy, effective: view.egress_policy },
      host: view,
    });
    await this.applier.applyEgressPolicy(host.id, grant.actor);
    return this.levels(row);
  }

  async userPolicy(userId: string): Promise<UserEgressPolicies> {
    const user = await this.users.findById(userId);
    if (!user) throw errors.notFound('User');
    return { user: storedPolicy(user.egress_policy), global: this.access.egressPolicyDefault };
  }

  /**
   * Sets a user's default for their hosts (null: the gateway's again); their running hosts without a policy of
   * their own follow it, one after the other, after this returns (their events say when).
   */
  async setUserPolicy(
    userId: string,
    policy: EgressPolicy | null,
    actor: Actor,
  ): Promise<UserEgressPolicies> {
    const user = await this.users.findById(userId);
    if (!user) throw errors.notFound('User');
    if (policy) checkPolicy(policy);
    await this.users.update(userId, {
      egress_policy: policy && JSON.stringify(policy),
      updated_at: nowIso(),
    });
    await this.bus.emit({
      type: 'user.egress_policy_changed',
      message: policy
        ? `default egress policy of ${user.username}'s hosts set (${policy.mode}, ${policy.rules.length} rules, default ${policy.default_action})`
        : `default egress policy of ${user.username}'s hosts removed; they follow the gateway's`,
      actor,
      userId,
      data: { username: user.username, policy },
    });
    const concerned = (await this.hosts.list({ userId, statuses: ['running'] })).filter(
      (host) => host.egress_policy === null,
    );
    void (async () => {
      for (const host of concerned) await this.applier.applyEgressPolicy(host.id, actor);
    })();
    return this.userPolicy(userId);
  }

  private async require(hostId: string): Promise<HostWithOwner> {
    const host = await this.hosts.findById(hostId);
    if (!host) throw errors.notFound('Host');
    return host;
  }
}
