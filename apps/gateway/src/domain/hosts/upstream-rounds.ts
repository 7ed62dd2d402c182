import type { Actor } from '@ccp/api';
import type { Logger } from 'pino';
import { systemActor } from '../../events/event-bus.js';
import type { ReplacedUpstream } from '../../events/internal-events.js';
import type { UpstreamSpec } from '../../runtime/workspace-runtime.js';
import type { ClusterBus } from '../../shared/cluster-messages.js';
import type { HostsRepository } from '../../store/hosts-repository.js';
import { confirmSystem, type SystemGrant } from '../access/grants.js';
import type { EgressIpsService } from '../egress/egress-ips-service.js';
import type { TaskRunner } from '../tasks/task-runner.js';
import type { HostReconciler } from './host-reconciler.js';
import { activeBinding } from './host-view.js';
import type { UpstreamSwitch } from './upstream-switch.js';

/**
 * The rounds that hold running hosts to their active upstream: after a binding or an egress IP changed (here or
 * on another gateway), and at each egress health round. Each picks the hosts concerned and looks at their
 * bindings against the upstream in use; the reconciler decides and acts.
 */
export class UpstreamRounds {
  constructor(
    private readonly hosts: HostsRepository,
    private readonly reconciler: HostReconciler,
    private readonly upstreams: UpstreamSwitch,
    private readonly egressIps: EgressIpsService,
    private readonly tasks: TaskRunner,
    private readonly cluster: ClusterBus,
    private readonly log: Logger,
  ) {}

  /**
   * Points a running host's egress gateway at its current active binding (its own node does it for a host placed
   * there). When the new path fails its checks, the host goes back to the upstream it had (`previous` when this
   * gateway did not apply it itself), as long as that upstream is still bound to it, and stays running.
   */
  async upstreamChanged(hostId: string, actor: Actor, previous?: UpstreamSpec): Promise<void> {
    const host = await this.hosts.findById(hostId);
    if (!host) return;
    const { upstream, binding } = await this.look(host.id);
    await this.reconciler.reconcile(
      host,
      'upstream-changed',
      { upstream },
      { node: this.tasks.node, actor, previous, binding },
    );
  }

  /** An egress IP's upstream changed: running hosts that use it switch in place. */
  async egressChanged(system: SystemGrant, egressIpId: string, replaced: ReplacedUpstream): Promise<void> {
    confirmSystem(system);
    await this.cluster.publish('egress_ip.upstream_changed', { egressIpId });
    await this.switchHostsUsing(egressIpId, {
      egressIpId,
      label: replaced.label,
      exitIp: replaced.ipAddress,
      config: replaced.config,
    });
  }

  /**
   * Follows what other gateways change: switches they ask for on this node's hosts, and egress IPs edited there
   * (each node switches its own running hosts; what they ran before is what this node applied).
   */
  follow(): void {
    this.cluster.subscribe('host.upstream_switch_requested', ({ hostId }) => {
      void this.hosts
        .findById(hostId)
        .then((host) =>
          // Only this node's own: a request is never passed on again.
          host && this.reconciler.placement(host, this.tasks.node) === 'local'
            ? this.upstreamChanged(host.id, systemActor)
            : undefined,
        )
        .catch((error: unknown) => this.log.error({ err: error, hostId }, 'switching upstream failed'));
    });
    this.cluster.subscribe('egress_ip.upstream_changed', ({ egressIpId }) => {
      void this.switchHostsUsing(egressIpId).catch((error: unknown) =>
        this.log.error({ err: error, egressIpId }, 'switching upstreams failed'),
      );
    });
  }

  private async switchHostsUsing(egressIpId: string, previous?: UpstreamSpec): Promise<void> {
    for (const host of await this.hosts.list({ node: this.tasks.node, statuses: ['running'] })) {
      if (await this.usesUpstream(host.id, egressIpId)) {
        await this.upstreamChanged(host.id, systemActor, previous).catch((error: unknown) =>
          this.log.error({ err: error, hostId: host.id }, 'switching upstream failed'),
        );
      }
    }
  }

  /** Tests the upstreams running hosts depend on, and moves each host whose upstream failed to a healthy
   * standby binding. */
  async checkUpstreams(system: SystemGrant): Promise<void> {
    confirmSystem(system);
    const running = await this.hosts.list({ node: this.tasks.node, statuses: ['running'] });
    const bindings = await this.hosts.bindings(running.map((h) => h.id));
    const tested = new Set<string>();
    for (const host of running) {
      for (const binding of bindings.get(host.id) ?? []) {
        if (tested.has(binding.egress_ip_id)) continue;
        tested.add(binding.egress_ip_id);
        await this.egressIps
          .recheck(binding.egress_ip_id)
          .catch((error: unknown) =>
            this.log.warn(
              { err: error, egressIpId: binding.egress_ip_id },
              'upstream health check failed to run',
            ),
          );
      }
    }
    for (const host of running) {
      const { upstream, binding } = await this.look(host.id);
      await this.reconciler.reconcile(
        host,
        'upstream-round',
        { upstream },
        { node: this.tasks.node, actor: systemActor, binding },
      );
    }
  }

  /** The host's active binding (the first healthy one) against the upstream this gateway applied to it. */
  private async look(hostId: string) {
    const binding = activeBinding((await this.hosts.bindings([hostId])).get(hostId) ?? []);
    const inUse = this.upstreams.inUse.get(hostId)?.egressIpId ?? null;
    // Only a host on its active egress IP can be on an old config of it (or on a reverted switch).
    const matches =
      binding && inUse === binding.egress_ip_id ? await this.upstreams.runsActive(hostId) : true;
    const active = binding && { egressIpId: binding.egress_ip_id, healthy: binding.healthy };
    return { binding, upstream: { active, inUse, matches } };
  }

  /** Whether the host leaves through the egress IP: the one applied here, else its active binding. */
  private async usesUpstream(hostId: string, egressIpId: string): Promise<boolean> {
    const current = this.upstreams.inUse.get(hostId);
    if (current) return current.egressIpId === egressIpId;
    return (
      activeBinding((await this.hosts.bindings([hostId])).get(hostId) ?? [])?.egress_ip_id === egressIpId
    );
  }
}
