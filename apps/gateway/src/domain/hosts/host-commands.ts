import type { Actor, TaskAccepted, TaskKind } from '@ccp/api';
import type { Logger } from 'pino';
import type { WorkspaceRuntime } from '../../runtime/workspace-runtime.js';
import type { HostsRepository, HostWithOwner } from '../../store/hosts-repository.js';
import { confirmSystem, type HostGrant, hostOf, type SystemGrant } from '../access/grants.js';
import { errors } from '../errors.js';
import type { TaskAdmission, TaskRunner } from '../tasks/task-runner.js';
import type { HostReconciler } from './host-reconciler.js';
import type { HostRecords } from './host-records.js';
import type { HostResourcePolicy } from './host-tasks.js';
import { nodeUnavailable, noEgressBound } from './lifecycle-errors.js';
import type { UpstreamRounds } from './upstream-rounds.js';

/**
 * What people (and the gateway on a user's behalf) ask of a host: each records what the host should be and
 * queues the task that gets it there on the host's node (host-tasks.ts), or hands it to the reconciler.
 */
export class HostCommands {
  constructor(
    private readonly hosts: HostsRepository,
    private readonly records: HostRecords,
    private readonly runtime: WorkspaceRuntime,
    private readonly tasks: TaskRunner,
    private readonly reconciler: HostReconciler,
    private readonly upstreamRounds: UpstreamRounds,
    private readonly resources: HostResourcePolicy,
    private readonly log: Logger,
  ) {}

  /** Queues a start; `bootstrap` marks the task as one the bootstrap paths may show and hand off. */
  async start(grant: HostGrant, kind: 'start' | 'bootstrap' = 'start'): Promise<TaskAccepted> {
    const host = await this.requireReachable(hostOf(grant, 'operate').id);
    if (!(await this.records.activeUpstream(host.id))) throw noEgressBound(grant.actor);
    return this.queue(kind, host, grant.actor, (insert) =>
      this.resources.admitStart(host, grant.actor, insert),
    );
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

  /** Applies the host's active binding now (after it changed); see UpstreamRounds.upstreamChanged. */
  async switchToActiveUpstream(grant: HostGrant): Promise<void> {
    return this.upstreamRounds.upstreamChanged(hostOf(grant, 'manage').id, grant.actor);
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

  private async stopHost(hostId: string, actor: Actor): Promise<TaskAccepted> {
    const host = await this.requireReachable(hostId);
    await this.tasks.cancel(hostId, 'the host was stopped', actor);
    return this.queue('stop', host, actor);
  }

  private async removeHost(host: HostWithOwner, actor: Actor): Promise<void> {
    if (host.status === 'node_unavailable') throw nodeUnavailable(host);
    await this.tasks.cancel(host.id, 'the host was deleted', actor);
    if (await this.tasks.isBusy(host.id))
      throw errors.conflict('host_busy', 'A task is running for this host; try again when it ends');
    if (host.node === null || host.node === this.tasks.node) {
      await this.reconciler.whileRemoving(host.id, () => this.runtime.remove(host.id));
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

  private async queue(
    kind: TaskKind,
    host: HostWithOwner,
    actor: Actor,
    admission?: TaskAdmission,
  ): Promise<TaskAccepted> {
    const row = await this.tasks.submit(
      { kind, hostId: host.id, userId: host.user_id, actor, node: host.node ?? this.tasks.node },
      admission,
    );
    return { task_id: row.id, status_url: `/v1/admin/tasks/${row.id}` };
  }

  /** A host whose node is heartbeating: nothing can be done to one whose node is gone but wait for it. */
  private async requireReachable(hostId: string): Promise<HostWithOwner> {
    const host = await this.records.require(hostId);
    if (host.status === 'node_unavailable') throw nodeUnavailable(host);
    return host;
  }
}
