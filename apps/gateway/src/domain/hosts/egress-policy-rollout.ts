import type { Actor } from '@ccp/api';
import type { Logger } from 'pino';
import { type EventBus, systemActor } from '../../events/event-bus.js';
import { RuntimeError, type WorkspaceRuntime } from '../../runtime/workspace-runtime.js';
import type { ClusterBus } from '../../shared/cluster-messages.js';
import type { HostsRepository, HostWithOwner } from '../../store/hosts-repository.js';
import { effectiveEgressPolicy, gatewayPolicy } from '../egress/egress-policy.js';
import type { HostReconciler } from './host-reconciler.js';
import type { HostRecords } from './host-records.js';
import type { AccessSettings } from './host-view.js';
import type { UpstreamSwitch } from './upstream-switch.js';

/**
 * Brings running hosts' egress gateways to the policy their records now say (egress-policy.ts): the host's node
 * rewrites the gateway's files and restarts its v2ray in place; another node is asked to, over the cluster bus.
 */
export class EgressPolicyRollout {
  constructor(
    private readonly hosts: HostsRepository,
    private readonly records: HostRecords,
    private readonly runtime: WorkspaceRuntime,
    private readonly upstreams: UpstreamSwitch,
    private readonly reconciler: HostReconciler,
    private readonly bus: EventBus,
    private readonly cluster: ClusterBus,
    private readonly access: AccessSettings,
    private readonly node: string,
    private readonly log: Logger,
  ) {}

  /** Applies the host's effective policy if it runs; what happened is in the host's events. */
  async apply(hostId: string, actor: Actor): Promise<void> {
    const host = await this.hosts.findById(hostId);
    if (host?.status !== 'running') return;
    const placement = this.reconciler.placement(host, this.node);
    if (placement === 'elsewhere')
      return this.cluster.publish('host.egress_policy_changed', { hostId: host.id });
    if (placement === 'local') await this.applyHere(host, actor);
  }

  /** Applies policies other gateways changed for this node's hosts (a request is never passed on again). */
  follow(): void {
    this.cluster.subscribe('host.egress_policy_changed', ({ hostId }) => {
      void this.hosts
        .findById(hostId)
        .then((host) =>
          host?.status === 'running' && this.reconciler.placement(host, this.node) === 'local'
            ? this.applyHere(host, systemActor)
            : undefined,
        )
        .catch((error: unknown) =>
          this.log.error({ err: error, hostId }, 'applying an egress policy failed'),
        );
    });
  }

  private async applyHere(host: HostWithOwner, actor: Actor): Promise<void> {
    const effective = effectiveEgressPolicy(host, this.access.egressPolicyDefault);
    const upstream = this.upstreams.inUse.get(host.id) ?? (await this.records.activeUpstream(host.id));
    if (!upstream) return;
    const began = performance.now();
    try {
      await this.runtime.applyEgressPolicy(host.id, upstream, gatewayPolicy(effective));
    } catch (error) {
      const code = error instanceof RuntimeError ? error.code : 'internal';
      const message = error instanceof Error ? error.message : String(error);
      await this.bus.emit({
        type: 'host.egress_policy_apply_failed',
        level: 'warn',
        message: `host ${host.short_id} does not follow its new egress policy yet: ${message}`,
        actor,
        userId: host.user_id,
        hostId: host.id,
        data: { code, error: message },
      });
      return;
    }
    const durationMs = Math.round(performance.now() - began);
    await this.bus.emit({
      type: 'host.egress_policy_applied',
      message: `host ${host.short_id} follows its egress policy (${effective.mode}, from ${effective.source}) after ${durationMs} ms`,
      actor,
      userId: host.user_id,
      hostId: host.id,
      data: { mode: effective.mode, source: effective.source, duration_ms: durationMs },
    });
  }
}
