import { isDeepStrictEqual } from 'node:util';
import {
  type Actor,
  ALREADY_RUNNING,
  type EventLevel,
  type RecordedEvents,
  type TaskAccepted,
  type TaskKind,
} from '@ccp/api';
import type { Logger } from 'pino';
import type { EventBus } from '../../events/event-bus.js';
import { systemActor } from '../../events/event-bus.js';
import type { ReplacedUpstream } from '../../events/internal-events.js';
import {
  RuntimeError,
  type RuntimeNotice,
  type UpstreamSpec,
  UpstreamSwitchReverted,
  type WorkspaceLimits,
  type WorkspaceRuntime,
  type WorkspaceSpec,
} from '../../runtime/workspace-runtime.js';
import { nowIso } from '../../shared/clock.js';
import type { ClusterBus } from '../../shared/cluster-messages.js';
import type { HostPatch, HostsRepository, HostWithOwner } from '../../store/hosts-repository.js';
import { confirmSystem, type HostGrant, hostOf, type SystemGrant } from '../access/grants.js';
import type { EgressIpsService } from '../egress/egress-ips-service.js';
import { errors } from '../errors.js';
import type { QueuedTask, TaskRunner } from '../tasks/task-runner.js';
import { type AccessSettings, activeBinding, adminHostView, linuxUserFor } from './host-view.js';

type StatusEventType = 'host.started' | 'host.stopped' | 'host.rebuilt' | 'host.reconciled' | 'host.failed';

/** An event that comes with a host's status change: the host and its view are filled in by `setStatus`. */
type StatusEvent = {
  [K in StatusEventType]: { type: K; message: string; level?: EventLevel } & Omit<RecordedEvents[K], 'host'>;
}[StatusEventType];

/** A host's limits and the quotas its start must fit (ResourcesService). */
export interface HostResourcePolicy {
  limitsOf(host: HostWithOwner): WorkspaceLimits;
  /** Fails with 409 `quota_exceeded` when starting the host would pass one of its owner's quotas. */
  admitStart(host: HostWithOwner, actor: Actor): Promise<void>;
}

/** Host lifecycle as tasks: start, stop, rebuild; plus removal, upstream switches and crash reconciliation. */
export class HostLifecycle {
  /**
   * The upstream each running host's egress gateway uses now, as it was when applied (a restarted gateway
   * learns it at the next switch): what a failed switch goes back to.
   */
  private readonly current = new Map<string, UpstreamSpec>();
  /** Running hosts whose workspace the last check found not running (checkRunning). */
  private readonly notRunning = new Set<string>();
  private checkingRunning = false;
  /** Hosts whose workspace is being removed here (a delete runs no task). */
  private readonly removing = new Set<string>();

  constructor(
    private readonly hosts: HostsRepository,
    private readonly egressIps: EgressIpsService,
    private readonly runtime: WorkspaceRuntime,
    private readonly tasks: TaskRunner,
    private readonly bus: EventBus,
    private readonly access: AccessSettings,
    private readonly resources: HostResourcePolicy,
    private readonly log: Logger,
    /** The VNC password of a host's desktop (Access.desktopPassword). */
    private readonly desktopPassword: (hostId: string) => string,
    private readonly cluster: ClusterBus,
  ) {
    this.registerTasks();
  }

  /** Queues a start; `bootstrap` marks the task as one the bootstrap paths may show and hand off. */
  async start(grant: HostGrant, kind: 'start' | 'bootstrap' = 'start'): Promise<TaskAccepted> {
    const host = await this.requireReachable(hostOf(grant, 'operate').id);
    if (!(await this.activeUpstream(host.id))) throw noEgressBound(grant.actor);
    await this.resources.admitStart(host, grant.actor);
    return this.queue(kind, host, grant.actor);
  }

  /** Queues a stop; a start still running for the host is cancelled first (its task fails as `cancelled`). */
  async stop(grant: HostGrant): Promise<TaskAccepted> {
    return this.stopHost(hostOf(grant, 'operate').id, grant.actor);
  }

  async rebuild(grant: HostGrant): Promise<TaskAccepted> {
    return this.queue('rebuild', await this.requireReachable(hostOf(grant, 'operate').id), grant.actor);
  }

  /**
   * Removes everything the engine holds for a host, after cancelling a start still running for it; refused
   * while another task runs for it. A host on another node is removed by that node (a `remove` task), and this
   * call waits for it.
   */
  async remove(grant: HostGrant): Promise<void> {
    return this.removeHost(hostOf(grant, 'manage'), grant.actor);
  }

  private async stopHost(hostId: string, actor: Actor): Promise<TaskAccepted> {
    const host = await this.requireReachable(hostId);
    await this.tasks.cancel(hostId, 'the host was stopped', actor);
    return this.queue('stop', host, actor);
  }

  private async removeHost(host: HostWithOwner, actor: Actor): Promise<void> {
    if (host.status === 'node_unavailable') throw this.nodeUnavailable(host);
    await this.tasks.cancel(host.id, 'the host was deleted', actor);
    if (await this.tasks.isBusy(host.id))
      throw errors.conflict('host_busy', 'A task is running for this host; try again when it ends');
    if (this.isLocal(host)) {
      this.removing.add(host.id);
      try {
        await this.runtime.remove(host.id);
      } finally {
        this.removing.delete(host.id);
      }
      return;
    }
    const { task_id } = await this.queue('remove', host, actor);
    const done = await this.tasks.finished(task_id, 60_000);
    if (done?.status !== 'succeeded')
      throw errors.unavailable(
        'node_unreachable',
        `Node ${host.node} did not remove the host's workspace${done?.error_message ? `: ${done.error_message}` : ' in time'}; try again`,
      );
  }

  /** The work of each lifecycle task, run by the host's node whichever gateway queued it. */
  private registerTasks(): void {
    const startWork = async (
      { hostId, actor }: QueuedTask,
      progress: (percent: number, stage: string) => Promise<void>,
      signal: AbortSignal,
    ) => {
      const current = await this.require(hostId!);
      if (current.status === 'running' && (await this.runtime.state(current.id)) === 'running')
        return ALREADY_RUNNING;
      const upstream = await this.activeUpstream(current.id);
      if (!upstream) throw noEgressBound(actor);
      // Again when it runs: other hosts of the owner may have started since it was queued.
      await this.resources.admitStart(current, actor);
      await this.setStatus(current, { status: 'starting', last_error: null }, actor);
      const { echoesOut } = await this.runtime.start(this.spec(current), upstream, progress, signal);
      this.current.set(current.id, upstream);
      await this.setStatus(
        current,
        { status: 'running', started_at: nowIso(), image: this.runtime.imageTag() },
        actor,
        {
          type: 'host.started',
          message:
            `host ${current.short_id} running through ${upstream.label} (${upstream.exitIp})` +
            (echoesOut.length > 0
              ? `; verified without the IP echoes that were out: ${echoesOut.join(', ')}`
              : ''),
          data: {
            egress_ip_id: upstream.egressIpId,
            ...(echoesOut.length > 0 ? { echoes_out: echoesOut } : {}),
          },
        },
      );
      return `running through ${upstream.label} (${upstream.exitIp})`;
    };
    const onFailure = async ({ hostId, actor }: QueuedTask, code: string, message: string) =>
      this.fail(hostId!, code, message, actor);
    // A start may wait long on an upstream that does not answer; a stop or delete ends it.
    this.tasks.handle('start', { work: startWork, cancellable: true, onFailure });
    this.tasks.handle('bootstrap', { work: startWork, cancellable: true, onFailure });
    this.tasks.handle('stop', {
      work: async ({ hostId, actor }) => {
        const current = await this.require(hostId!);
        await this.setStatus(current, { status: 'stopping' }, actor);
        await this.runtime.stop(current.id);
        this.current.delete(current.id);
        await this.setStatus(current, { status: 'stopped' }, actor, {
          type: 'host.stopped',
          message: `host ${current.short_id} stopped`,
        });
        return 'stopped';
      },
      onFailure,
    });
    this.tasks.handle('rebuild', {
      work: async ({ hostId, actor }, progress) => {
        const current = await this.require(hostId!);
        const wasRunning = current.status === 'running';
        const upstream = wasRunning ? await this.activeUpstream(current.id) : null;
        if (wasRunning && !upstream)
          throw errors.conflict('no_egress_bound', 'The host has no egress IP bound');
        await this.setStatus(current, { status: 'rebuilding' }, actor);
        await this.runtime.rebuild(this.spec(current), upstream, progress);
        if (upstream) this.current.set(current.id, upstream);
        const status = wasRunning ? 'running' : current.status === 'created' ? 'created' : 'stopped';
        await this.setStatus(current, { status, image: this.runtime.imageTag(), last_error: null }, actor, {
          type: 'host.rebuilt',
          message: `host ${current.short_id} rebuilt from ${this.runtime.imageTag()}`,
        });
        return `rebuilt from ${this.runtime.imageTag()}`;
      },
      onFailure,
    });
    this.tasks.handle('remove', {
      work: async ({ hostId }) => {
        await this.runtime.remove(hostId!);
        this.current.delete(hostId!);
        return 'workspace, home and keys removed';
      },
    });
  }

  private isLocal(host: HostWithOwner): boolean {
    return host.node === null || host.node === this.tasks.node;
  }

  private async queue(kind: TaskKind, host: HostWithOwner, actor: Actor): Promise<TaskAccepted> {
    const row = await this.tasks.submit({
      kind,
      hostId: host.id,
      userId: host.user_id,
      actor,
      node: host.node ?? this.tasks.node,
    });
    return this.accepted(row.id);
  }

  /** A host whose node is heartbeating: nothing can be done to one whose node is gone but wait for it. */
  private async requireReachable(hostId: string): Promise<HostWithOwner> {
    const host = await this.require(hostId);
    if (host.status === 'node_unavailable') throw this.nodeUnavailable(host);
    return host;
  }

  private nodeUnavailable(host: HostWithOwner) {
    return errors.conflict(
      'node_unavailable',
      `The host's node ${host.node} is not heartbeating; its workspace is out of reach until the node returns`,
    );
  }

  /**
   * Points a running host's egress gateway at its current active binding. When the new path fails its checks,
   * the host goes back to the upstream it had (`previous` when this gateway did not apply it itself), as long
   * as that upstream is still bound to it, and stays running.
   */
  async switchToActiveUpstream(grant: HostGrant): Promise<void> {
    return this.switchHost(hostOf(grant, 'manage').id, grant.actor);
  }

  private async switchHost(hostId: string, actor: Actor, previous?: UpstreamSpec): Promise<void> {
    const host = await this.hosts.findById(hostId);
    if (host?.status !== 'running') return;
    if (!this.isLocal(host)) {
      // Its node's gateway applies it; the events it writes say how it went.
      await this.cluster.publish('host.upstream_switch_requested', { hostId: host.id });
      return;
    }
    const upstream = await this.activeUpstream(hostId);
    if (!upstream) return;
    const fallback = await this.stillBound(hostId, this.current.get(hostId) ?? previous);
    try {
      await this.runtime.switchUpstream(hostId, upstream, fallback);
      this.current.set(hostId, upstream);
    } catch (error) {
      if (error instanceof UpstreamSwitchReverted && fallback) {
        this.current.set(hostId, fallback);
        await this.bus.emit({
          type: 'host.upstream.switch_failed',
          level: 'warn',
          message: `host ${host.short_id} stays on ${fallback.label} (${fallback.exitIp}) as it was: the switch to ${upstream.label} (${upstream.exitIp}) failed (${error.code}: ${error.message})`,
          actor,
          userId: host.user_id,
          hostId,
          data: {
            egress_ip_id: upstream.egressIpId,
            kept_egress_ip_id: fallback.egressIpId,
            code: error.code,
            error: error.message,
          },
        });
        return;
      }
      // Without an upstream to go back to, the runtime leaves the host stopped; the record must say so.
      const code = error instanceof RuntimeError ? error.code : 'internal';
      await this.fail(hostId, code, error instanceof Error ? error.message : String(error), actor);
      return;
    }
    await this.bus.emit({
      type: 'host.upstream_switched',
      message: `host ${host.short_id} now leaves through ${upstream.label} (${upstream.exitIp})`,
      actor,
      userId: host.user_id,
      hostId,
      data: { egress_ip_id: upstream.egressIpId },
    });
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
        .then((host) => (host && this.isLocal(host) ? this.switchHost(host.id, systemActor) : undefined))
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
        await this.switchHost(host.id, systemActor, previous).catch((error: unknown) =>
          this.log.error({ err: error, hostId: host.id }, 'switching upstream failed'),
        );
      }
    }
  }

  /** Logs what the engine did on its own for a host (the egress gateway's supervisor restarting v2ray). */
  async runtimeNotice(system: SystemGrant, notice: RuntimeNotice): Promise<void> {
    confirmSystem(system);
    const host = await this.hosts.findById(notice.hostId);
    if (!host) return;
    await this.bus.emit({
      type: 'host.egress.restarted',
      level: 'warn',
      message: `host ${host.short_id}: the egress tunnel died and was restarted (${notice.message}); traffic was blocked meanwhile`,
      actor: systemActor,
      userId: host.user_id,
      hostId: host.id,
      data: { detail: notice.message },
    });
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
      const runs = this.current.get(host.id);
      const current = runs?.egressIpId;
      const desired = activeBinding((await this.hosts.bindings([host.id])).get(host.id) ?? []);
      if (!desired) continue;
      if (!runs || !current) {
        // Started before this gateway did (a restart, a crash): which upstream its egress gateway has is not
        // known here, so a healthy active binding is applied again; skipping the host would leave it on an
        // upstream that failed, for good.
        if (desired.healthy) await this.switchHost(host.id, systemActor);
        continue;
      }
      if (desired.egress_ip_id === current) {
        // A switch that failed left the host on the upstream it had; each round tries it again.
        const wanted = await this.activeUpstream(host.id);
        if (wanted && !sameUpstream(wanted, runs)) await this.switchHost(host.id, systemActor);
        continue;
      }
      await this.bus.emit({
        type: 'host.failover',
        level: 'warn',
        message: `host ${host.short_id}: upstream failed its checks; switching to ${desired.label} (${desired.ip_address})`,
        actor: systemActor,
        userId: host.user_id,
        hostId: host.id,
        data: { from_egress_ip_id: current, to_egress_ip_id: desired.egress_ip_id },
      });
      await this.switchHost(host.id, systemActor);
    }
  }

  private async usesUpstream(hostId: string, egressIpId: string): Promise<boolean> {
    const current = this.current.get(hostId);
    if (current) return current.egressIpId === egressIpId;
    return (
      activeBinding((await this.hosts.bindings([hostId])).get(hostId) ?? [])?.egress_ip_id === egressIpId
    );
  }

  /** The upstream, if its egress IP is still bound to the host (an unbound one is never gone back to). */
  private async stillBound(hostId: string, upstream: UpstreamSpec | undefined): Promise<UpstreamSpec | null> {
    if (!upstream) return null;
    const bindings = (await this.hosts.bindings([hostId])).get(hostId) ?? [];
    return bindings.some((binding) => binding.egress_ip_id === upstream.egressIpId) ? upstream : null;
  }

  /** Stops the running hosts of a user whose access ended (disabled, expired). */
  async stopHostsOf(system: SystemGrant, userId: string): Promise<void> {
    const { reason } = confirmSystem(system);
    for (const host of await this.hosts.list({ userId, statuses: ['running', 'starting'] })) {
      await this.stopHost(host.id, system.actor).catch((error: unknown) =>
        this.log.warn({ err: error, hostId: host.id, reason }, 'could not queue the stop of a host'),
      );
    }
  }

  /** Removes the engine's resources of every host of a user about to be deleted, on each host's node. */
  async removeHostsOf(system: SystemGrant, userId: string): Promise<void> {
    confirmSystem(system);
    for (const host of await this.hosts.list({ userId })) {
      await this.tasks.cancel(host.id, 'the owner was deleted', system.actor);
      await this.tasks.settled(host.id);
      await this.removeHost(host, system.actor).catch((error: unknown) =>
        this.log.warn({ err: error, hostId: host.id }, 'could not remove the workspace of a deleted user'),
      );
    }
  }

  /**
   * After a restart: this node's unfinished tasks fail as interrupted, and each of its hosts is checked against
   * the engine.
   */
  async reconcile(system: SystemGrant, node: string): Promise<void> {
    confirmSystem(system);
    await this.tasks.failInterrupted();
    await this.stopMovedAway(system, node);
    for (const host of await this.hosts.list({
      node,
      statuses: ['starting', 'running', 'stopping', 'rebuilding'],
    })) {
      let state: Awaited<ReturnType<WorkspaceRuntime['state']>>;
      try {
        state = await this.runtime.state(host.id);
      } catch (error) {
        this.log.warn({ err: error, hostId: host.id }, 'cannot reconcile host: engine unavailable');
        continue;
      }
      if (host.status === 'running' && state === 'running') continue;
      if (host.status === 'stopping' || (state === 'stopped' && host.status !== 'running')) {
        await this.runtime.stop(host.id).catch(() => undefined);
        await this.setStatus(host, { status: 'stopped' }, systemActor, {
          type: 'host.reconciled',
          message: `host ${host.short_id} was ${host.status} before the restart; now stopped`,
        });
        continue;
      }
      // Running in the database but not in the engine (or half there): never left lying as running.
      await this.runtime.stop(host.id).catch(() => undefined);
      await this.setStatus(
        host,
        { status: 'failed', last_error: `the workspace was ${state} when the gateway started` },
        systemActor,
        {
          type: 'host.reconciled',
          level: 'warn',
          message: `host ${host.short_id} was ${host.status} but its workspace is ${state}; marked failed`,
        },
      );
    }
  }

  /**
   * Compares this node's running hosts with its engine: one whose workspace is not running at two checks in a row
   * (a container stopped or removed outside the gateway, or one the engine could not restart) is marked
   * `failed`, so nobody is told it runs; a start makes it again. Hosts with a task are left to it.
   */
  async checkRunning(system: SystemGrant, node: string): Promise<void> {
    confirmSystem(system);
    // A round slower than the interval is not run twice at once.
    if (this.checkingRunning) return;
    this.checkingRunning = true;
    try {
      await this.compareRunning(node);
    } finally {
      this.checkingRunning = false;
    }
  }

  private async compareRunning(node: string): Promise<void> {
    const seen = new Set<string>();
    for (const host of await this.hosts.list({ node, statuses: ['running'] })) {
      if (this.removing.has(host.id) || (await this.tasks.isBusy(host.id))) continue;
      let state: Awaited<ReturnType<WorkspaceRuntime['state']>>;
      try {
        state = await this.runtime.state(host.id);
      } catch {
        // The engine itself is down: its health check says so, and nothing is judged meanwhile.
        return;
      }
      if (state === 'running') continue;
      seen.add(host.id);
      if (!this.notRunning.has(host.id)) {
        this.notRunning.add(host.id);
        continue;
      }
      this.notRunning.delete(host.id);
      await this.runtime.stop(host.id).catch(() => undefined);
      await this.fail(
        host.id,
        'workspace_lost',
        `its workspace was ${state} at two checks in a row while the host was running (stopped or removed outside the gateway); start it again`,
        systemActor,
      );
    }
    for (const hostId of this.notRunning) if (!seen.has(hostId)) this.notRunning.delete(hostId);
  }

  /**
   * Stops what this node's engine still runs for hosts placed on another node meanwhile (this node was removed
   * while it was silent); their containers and home volumes are left as they are, for the operator to keep or
   * delete.
   */
  async stopMovedAway(system: SystemGrant, node: string): Promise<void> {
    confirmSystem(system);
    let held: string[];
    try {
      held = await this.runtime.hostIds();
    } catch (error) {
      this.log.warn({ err: error }, 'cannot look for workspaces of hosts moved away: engine unavailable');
      return;
    }
    for (const hostId of held) {
      const host = await this.hosts.findById(hostId);
      if (!host || host.node === null || host.node === node) continue;
      if ((await this.runtime.state(hostId)) !== 'running') continue;
      await this.runtime.stop(hostId);
      await this.bus.emit({
        type: 'host.stale_workspace_stopped',
        level: 'warn',
        message: `node ${node} stopped its old workspace of host ${host.short_id}, which is now placed on node ${host.node}; its containers and home volume stay on ${node}`,
        actor: systemActor,
        userId: host.user_id,
        hostId,
        data: { node, placed_on: host.node },
      });
    }
  }

  private async activeUpstream(hostId: string): Promise<UpstreamSpec | null> {
    const bindings = (await this.hosts.bindings([hostId])).get(hostId) ?? [];
    const active = activeBinding(bindings);
    if (!active) return null;
    const { row, config } = await this.egressIps.proxyConfig(active.egress_ip_id);
    return { egressIpId: row.id, label: row.label, exitIp: row.ip_address, config };
  }

  private spec(host: HostWithOwner): WorkspaceSpec {
    return {
      hostId: host.id,
      shortId: host.short_id,
      linuxUser: linuxUserFor(host.username),
      authorizedKey: host.gateway_public_key ?? '',
      desktopPassword: this.desktopPassword(host.id),
      limits: this.resources.limitsOf(host),
    };
  }

  private async require(hostId: string): Promise<HostWithOwner> {
    const host = await this.hosts.findById(hostId);
    if (!host) throw errors.notFound('Host');
    return host;
  }

  private accepted(taskId: string): TaskAccepted {
    return { task_id: taskId, status_url: `/v1/admin/tasks/${taskId}` };
  }

  private async fail(hostId: string, code: string, message: string, actor: Actor): Promise<void> {
    const host = await this.hosts.findById(hostId);
    if (!host) return;
    await this.setStatus(host, { status: 'failed', last_error: `${code}: ${message}` }, actor, {
      type: 'host.failed',
      level: 'error',
      message: `host ${host.short_id} failed: ${message}`,
      data: { code },
    });
  }

  private async setStatus(
    host: HostWithOwner,
    patch: HostPatch,
    actor: Actor,
    event?: StatusEvent,
  ): Promise<void> {
    await this.hosts.update(host.id, { ...patch, updated_at: nowIso() });
    const row = (await this.hosts.findById(host.id))!;
    const view = await adminHostView(this.hosts, row, this.access);
    if (event) {
      await this.bus.emit({ ...event, actor, userId: host.user_id, hostId: host.id, host: view });
    } else {
      this.bus.notify({ type: 'host.status_changed', host: view });
    }
  }
}

/** Whether a host running `a` already leaves the way `b` says (same exit, same config, key order aside). */
function sameUpstream(a: UpstreamSpec, b: UpstreamSpec): boolean {
  return a.exitIp === b.exitIp && isDeepStrictEqual(a.config, b.config);
}

/** A start with no egress IP bound, said to whoever can act on it: only an administrator can bind one. */
function noEgressBound(actor: Actor) {
  return errors.conflict(
    'no_egress_bound',
    actor.kind === 'admin' || actor.kind === 'system'
      ? 'The host has no egress IP bound; bind one first (POST /v1/admin/bindings)'
      : 'The host has no egress IP, so it cannot start; ask your administrator to bind one',
  );
}
