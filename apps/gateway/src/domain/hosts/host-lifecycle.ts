import type { Actor, TaskAccepted } from '@ccp/api';
import type { Logger } from 'pino';
import type { EventBus } from '../../events/event-bus.js';
import type { ReplacedUpstream } from '../../events/internal-events.js';
import type { RuntimeNotice, WorkspaceRuntime } from '../../runtime/workspace-runtime.js';
import type { ClusterBus } from '../../shared/cluster-messages.js';
import type { HostsRepository } from '../../store/hosts-repository.js';
import type { HostGrant, SystemGrant } from '../access/grants.js';
import type { EgressIpsService } from '../egress/egress-ips-service.js';
import type { TaskRunner } from '../tasks/task-runner.js';
import { EgressPolicyRollout } from './egress-policy-rollout.js';
import { EngineRounds } from './engine-rounds.js';
import { HostCommands } from './host-commands.js';
import { HostReconciler } from './host-reconciler.js';
import { HostRecords } from './host-records.js';
import { type HostResourcePolicy, HostTasks } from './host-tasks.js';
import type { AccessSettings } from './host-view.js';
import { UpstreamRounds } from './upstream-rounds.js';
import { UpstreamSwitch } from './upstream-switch.js';

/**
 * The host lifecycle, as the rest of the gateway sees it: commands (host-commands.ts) that record what a host
 * should be and queue its task (host-tasks.ts), and the reconciler (host-reconciler.ts, deciding with
 * reconcile-decision.ts) that the rounds of engine-rounds.ts and upstream-rounds.ts run on each occasion.
 */
export class HostLifecycle {
  private readonly commands: HostCommands;
  private readonly engineRounds: EngineRounds;
  private readonly upstreamRounds: UpstreamRounds;
  private readonly egressPolicies: EgressPolicyRollout;
  private readonly hostTasks: HostTasks;
  private readonly bus: EventBus;
  private readonly cluster: ClusterBus;
  private readonly log: Logger;

  constructor(
    hosts: HostsRepository,
    egressIps: EgressIpsService,
    runtime: WorkspaceRuntime,
    tasks: TaskRunner,
    bus: EventBus,
    access: AccessSettings,
    resources: HostResourcePolicy,
    log: Logger,
    /** The VNC password of a host's desktop (Access.desktopPassword). */
    desktopPassword: (hostId: string) => string,
    cluster: ClusterBus,
  ) {
    const records = new HostRecords(hosts, egressIps, bus, access);
    const upstreams = new UpstreamSwitch(hosts, records, runtime, bus);
    this.hostTasks = new HostTasks(records, runtime, tasks, upstreams, resources, desktopPassword, access);
    this.hostTasks.register();
    this.bus = bus;
    this.cluster = cluster;
    this.log = log;
    const reconciler = new HostReconciler(records, runtime, bus, cluster, upstreams);
    this.egressPolicies = new EgressPolicyRollout(
      hosts,
      records,
      runtime,
      upstreams,
      reconciler,
      bus,
      cluster,
      access,
      tasks.node,
      log,
    );
    this.engineRounds = new EngineRounds(hosts, reconciler, runtime, tasks, bus, log);
    this.upstreamRounds = new UpstreamRounds(hosts, reconciler, upstreams, egressIps, tasks, cluster, log);
    this.commands = new HostCommands(
      hosts,
      records,
      runtime,
      tasks,
      reconciler,
      this.upstreamRounds,
      resources,
      log,
    );
  }

  start(grant: HostGrant, kind: 'start' | 'bootstrap' = 'start'): Promise<TaskAccepted> {
    return this.commands.start(grant, kind);
  }

  stop(grant: HostGrant): Promise<TaskAccepted> {
    return this.commands.stop(grant);
  }

  rebuild(grant: HostGrant): Promise<TaskAccepted> {
    return this.commands.rebuild(grant);
  }

  remove(grant: HostGrant): Promise<void> {
    return this.commands.remove(grant);
  }

  switchToActiveUpstream(grant: HostGrant): Promise<void> {
    return this.commands.switchToActiveUpstream(grant);
  }

  stopHostsOf(system: SystemGrant, userId: string): Promise<void> {
    return this.commands.stopHostsOf(system, userId);
  }

  removeHostsOf(system: SystemGrant, userId: string): Promise<void> {
    return this.commands.removeHostsOf(system, userId);
  }

  reconcile(system: SystemGrant, node: string): Promise<void> {
    return this.engineRounds.reconcile(system, node);
  }

  checkRunning(system: SystemGrant, node: string): Promise<void> {
    return this.engineRounds.checkRunning(system, node);
  }

  stopMovedAway(system: SystemGrant, node: string): Promise<void> {
    return this.engineRounds.stopMovedAway(system, node);
  }

  runtimeNotice(system: SystemGrant, notice: RuntimeNotice): Promise<void> {
    return this.engineRounds.runtimeNotice(system, notice);
  }

  egressChanged(system: SystemGrant, egressIpId: string, replaced: ReplacedUpstream): Promise<void> {
    return this.upstreamRounds.egressChanged(system, egressIpId, replaced);
  }

  checkUpstreams(system: SystemGrant): Promise<void> {
    return this.upstreamRounds.checkUpstreams(system);
  }

  /** Makes a running host's egress gateway follow the egress policy its record says now. */
  applyEgressPolicy(hostId: string, actor: Actor): Promise<void> {
    return this.egressPolicies.apply(hostId, actor);
  }

  /** Resolves once new hosts' workspaces being made ahead of their first start are made. */
  preparedAhead(): Promise<void> {
    return this.hostTasks.preparedAhead();
  }

  follow(): void {
    this.hostTasks.follow(this.bus, this.cluster, this.log);
    this.upstreamRounds.follow();
    this.egressPolicies.follow();
  }
}
