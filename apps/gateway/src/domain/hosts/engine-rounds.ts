import type { Logger } from 'pino';
import type { EventBus } from '../../events/event-bus.js';
import { systemActor } from '../../events/event-bus.js';
import type { RuntimeNotice, WorkspaceRuntime } from '../../runtime/workspace-runtime.js';
import type { HostsRepository } from '../../store/hosts-repository.js';
import { confirmSystem, type SystemGrant } from '../access/grants.js';
import type { TaskRunner } from '../tasks/task-runner.js';
import type { HostReconciler } from './host-reconciler.js';

/**
 * The rounds that hold hosts against this node's engine: at start-up, periodically, and when the node rejoins.
 * Each picks the hosts concerned and what to look at; the reconciler decides and acts.
 */
export class EngineRounds {
  /** Running hosts whose workspace the last check found not running (checkRunning). */
  private readonly notRunning = new Set<string>();
  private checkingRunning = false;

  constructor(
    private readonly hosts: HostsRepository,
    private readonly reconciler: HostReconciler,
    private readonly runtime: WorkspaceRuntime,
    private readonly tasks: TaskRunner,
    private readonly bus: EventBus,
    private readonly log: Logger,
  ) {}

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
      const engine = await this.engineState(host.id, (error) =>
        this.log.warn({ err: error, hostId: host.id }, 'cannot reconcile host: engine unavailable'),
      );
      await this.reconciler.reconcile(host, 'restart', { engine }, { node, actor: systemActor });
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
    const suspects = new Set<string>();
    for (const host of await this.hosts.list({ node, statuses: ['running'] })) {
      // A host being removed or with a task is theirs: its engine is not asked.
      const removing = this.reconciler.isRemoving(host.id);
      const busy = !removing && (await this.tasks.isBusy(host.id));
      const engine = removing || busy ? null : await this.engineState(host.id, () => undefined);
      // The engine itself is down: its health check says so, and nothing is judged meanwhile.
      if (engine === 'unreachable') return;
      const seen = { engine, busy, lostBefore: this.notRunning.has(host.id) };
      const action = await this.reconciler.reconcile(host, 'check', seen, { node, actor: systemActor });
      if (action.kind === 'suspect') {
        suspects.add(host.id);
        this.notRunning.add(host.id);
      }
    }
    for (const hostId of this.notRunning) if (!suspects.has(hostId)) this.notRunning.delete(hostId);
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
      // A workspace of a deleted host is the operator's; only those of hosts placed elsewhere are looked at.
      if (!host || this.reconciler.placement(host, node) !== 'elsewhere') continue;
      const engine = await this.engineState(hostId, (error) =>
        this.log.warn({ err: error, hostId }, 'cannot look at the old workspace of a host moved away'),
      );
      await this.reconciler.reconcile(host, 'rejoin', { engine }, { node, actor: systemActor });
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

  private async engineState(hostId: string, unreachable: (error: unknown) => void) {
    try {
      return await this.runtime.state(hostId);
    } catch (error) {
      unreachable(error);
      return 'unreachable' as const;
    }
  }
}
