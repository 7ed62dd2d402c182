import type { Actor, HostStatus } from '@ccp/api';
import type { EventBus } from '../../events/event-bus.js';
import { systemActor } from '../../events/event-bus.js';
import type { UpstreamSpec, WorkspaceRuntime } from '../../runtime/workspace-runtime.js';
import type { ClusterBus } from '../../shared/cluster-messages.js';
import type { BindingDetail, HostWithOwner } from '../../store/hosts-repository.js';
import type { HostRecords } from './host-records.js';
import { type Action, decide, desiredOf, type Observed, type Occasion } from './reconcile-decision.js';
import type { UpstreamSwitch } from './upstream-switch.js';

type Failover = Extract<Action, { kind: 'failover' }>;

/** What a round saw of a host beyond its record; what it did not look at stays unknown. */
type Seen = Partial<Pick<Observed, 'engine' | 'busy' | 'lostBefore' | 'upstream'>>;

/** What applying an action needs beyond the observation: who acts, and names for its events. */
interface Context {
  /** The node this gateway runs as. */
  node: string;
  actor: Actor;
  /** The upstream the host ran before its egress IP was edited, for a switch to go back to. */
  previous?: UpstreamSpec;
  /** The active binding, for the failover event's words. */
  binding?: BindingDetail | null;
}

/**
 * The host lifecycle's reconciler, one host at a time: what a round (engine-rounds.ts, upstream-rounds.ts) saw of
 * a host becomes an observation, `decide` picks the action against what the record says the host should be, and
 * the action is done here. Rounds keep their own memory (suspects); this keeps the removals under way.
 */
export class HostReconciler {
  /** Hosts whose workspace is being removed here: their desired state is `removed` (a delete runs no task). */
  private readonly removing = new Set<string>();

  constructor(
    private readonly records: HostRecords,
    private readonly runtime: WorkspaceRuntime,
    private readonly bus: EventBus,
    private readonly cluster: ClusterBus,
    private readonly upstreams: UpstreamSwitch,
  ) {}

  /** Records a host as to be removed while its workspace is removed here; the reconciler leaves it alone. */
  async whileRemoving(hostId: string, removal: () => Promise<void>): Promise<void> {
    this.removing.add(hostId);
    try {
      await removal();
    } finally {
      this.removing.delete(hostId);
    }
  }

  isRemoving(hostId: string): boolean {
    return this.removing.has(hostId);
  }

  /** Where the record places the host, seen from `node`. */
  placement(host: HostWithOwner, node: string): Observed['node'] {
    if (host.status === 'node_unavailable') return 'unavailable';
    return host.node === null || host.node === node ? 'local' : 'elsewhere';
  }

  /** Observes the host, decides, and applies the action; returns it for the round's own memory. */
  async reconcile(host: HostWithOwner, occasion: Occasion, seen: Seen, context: Context): Promise<Action> {
    const observed: Observed = {
      occasion,
      record: host.status as HostStatus,
      node: this.placement(host, context.node),
      engine: seen.engine ?? null,
      busy: seen.busy ?? false,
      lostBefore: seen.lostBefore ?? false,
      upstream: seen.upstream ?? { active: null, inUse: null, matches: true },
    };
    const action = decide(observed, this.removing.has(host.id) ? 'removed' : desiredOf(observed.record));
    await this.apply(host, action, observed, context);
    return action;
  }

  private async apply(host: HostWithOwner, action: Action, observed: Observed, context: Context) {
    const { engine: state, record: status } = observed;
    switch (action.kind) {
      case 'none':
      case 'suspect':
        return;
      case 'fail-lost':
        await this.runtime.stop(host.id).catch(() => undefined);
        return this.records.fail(
          host.id,
          'workspace_lost',
          `its workspace was ${state} at two checks in a row while the host was running (stopped or removed outside the gateway); start it again`,
          systemActor,
        );
      case 'settle-stopped':
        await this.runtime.stop(host.id).catch(() => undefined);
        return this.records.setStatus(host, { status: 'stopped' }, systemActor, {
          type: 'host.reconciled',
          message: `host ${host.short_id} was ${status} before the restart; now stopped`,
        });
      case 'settle-failed':
        // Running in the database but not in the engine (or half there): never left lying as running.
        await this.runtime.stop(host.id).catch(() => undefined);
        return this.records.setStatus(
          host,
          { status: 'failed', last_error: `the workspace was ${state} when the gateway started` },
          systemActor,
          {
            type: 'host.reconciled',
            level: 'warn',
            message: `host ${host.short_id} was ${status} but its workspace is ${state}; marked failed`,
          },
        );
      case 'stop-stale':
        return host.node && this.stopStale(host, host.node, context.node);
      case 'forward-switch':
        // Its node's gateway applies it; the events it writes say how it went.
        return this.cluster.publish('host.upstream_switch_requested', { hostId: host.id });
      case 'failover':
        if (context.binding) await this.failover(host, action, context.binding);
        return this.upstreams.apply(host, context.actor, context.previous);
      case 'switch-upstream':
        return this.upstreams.apply(host, context.actor, context.previous);
    }
  }

  private async stopStale(host: HostWithOwner, placedOn: string, node: string): Promise<void> {
    await this.runtime.stop(host.id);
    await this.bus.emit({
      type: 'host.stale_workspace_stopped',
      level: 'warn',
      message: `node ${node} stopped its old workspace of host ${host.short_id}, which is now placed on node ${placedOn}; its containers and home volume stay on ${node}`,
      actor: systemActor,
      userId: host.user_id,
      hostId: host.id,
      data: { node, placed_on: placedOn },
    });
  }

  private async failover(host: HostWithOwner, { from, to }: Failover, binding: BindingDetail): Promise<void> {
    await this.bus.emit({
      type: 'host.failover',
      level: 'warn',
      message: `host ${host.short_id}: upstream failed its checks; switching to ${binding.label} (${binding.ip_address})`,
      actor: systemActor,
      userId: host.user_id,
      hostId: host.id,
      data: { from_egress_ip_id: from, to_egress_ip_id: to },
    });
  }
}
