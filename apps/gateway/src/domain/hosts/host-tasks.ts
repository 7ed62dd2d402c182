import { isDeepStrictEqual } from 'node:util';
import { type Actor, ALREADY_RUNNING } from '@ccp/api';
import type { Logger } from 'pino';
import type { EventBus } from '../../events/event-bus.js';
import type {
  UpstreamSpec,
  WorkspaceLimits,
  WorkspaceRuntime,
  WorkspaceSpec,
} from '../../runtime/workspace-runtime.js';
import { nowIso } from '../../shared/clock.js';
import type { ClusterBus } from '../../shared/cluster-messages.js';
import type { HostPatch, HostWithOwner } from '../../store/hosts-repository.js';
import type { TasksRepository } from '../../store/tasks-repository.js';
import { effectiveEgressPolicy, gatewayPolicy } from '../egress/egress-policy.js';
import { errors } from '../errors.js';
import type { QueuedTask, TaskRunner } from '../tasks/task-runner.js';
import type { HostRecords, StatusEvent } from './host-records.js';
import { type AccessSettings, linuxUserFor } from './host-view.js';
import { noEgressBound } from './lifecycle-errors.js';
import type { UpstreamSwitch } from './upstream-switch.js';

/** A host's limits and the quotas its start must fit (ResourcesService). */
export interface HostResourcePolicy {
  limitsOf(host: HostWithOwner): WorkspaceLimits;
  /**
   * Fails with 409 `quota_exceeded` when starting the host would pass one of its owner's quotas; else runs
   * `queue` (given a repository when it runs inside the owner's quota lock).
   */
  admitStart<T>(
    host: HostWithOwner,
    actor: Actor,
    queue: (tasks?: TasksRepository) => Promise<T>,
  ): Promise<T>;
}

/** The work of each lifecycle task (start, stop, rebuild, remove), run by the host's node whichever gateway queued it. */
export class HostTasks {
  /** The upstream each running host uses now (UpstreamSwitch.inUse): a start or rebuild sets it, a stop ends it. */
  private readonly current: Map<string, UpstreamSpec>;
  private readonly preparing = new Set<Promise<void>>();

  constructor(
    private readonly records: HostRecords,
    private readonly runtime: WorkspaceRuntime,
    private readonly tasks: TaskRunner,
    upstreams: UpstreamSwitch,
    private readonly resources: HostResourcePolicy,
    /** The VNC password of a host's desktop (Access.desktopPassword). */
    private readonly desktopPassword: (hostId: string) => string,
    private readonly access: Pick<AccessSettings, 'egressPolicyDefault'>,
  ) {
    this.current = upstreams.inUse;
  }

  /**
   * A new host gets its volumes and workspace container made and set up ahead on its node (run once without a
   * network, then stopped), so its first start is a `docker start` like every later one; a host created at
   * another gateway is announced to the others. Best effort: a start asked meanwhile waits for the container to
   * be made (the runtime takes one host's calls in turn), and what was made for a host deleted meanwhile is
   * removed.
   */
  follow(bus: EventBus, cluster: Pick<ClusterBus, 'publish' | 'subscribe'>, log: Logger): void {
    const prepare = (hostId: string) => {
      const preparing = this.prepareAhead(hostId)
        .catch((error: unknown) =>
          log.debug({ err: error, hostId }, 'making a new host ahead of its first start failed'),
        )
        .finally(() => this.preparing.delete(preparing));
      this.preparing.add(preparing);
    };
    // Not awaited: the creation's answer does not wait for the engine (nor for the other gateways).
    bus.on('host.created', ({ hostId }) => {
      if (!hostId) return;
      prepare(hostId);
      void cluster
        .publish('host.created', { hostId })
        .catch((error: unknown) =>
          log.debug({ err: error, hostId }, 'announcing a new host to the other gateways failed'),
        );
    });
    cluster.subscribe('host.created', ({ hostId }) => prepare(hostId));
  }

  /** Resolves once what is being made ahead is made (a gateway that stops waits for it). */
  async preparedAhead(): Promise<void> {
    await Promise.all(this.preparing);
  }

  private async prepareAhead(hostId: string): Promise<void> {
    const host = await this.records.find(hostId);
    const here = host?.node === null || host?.node === this.tasks.node;
    if (host?.status !== 'created' || !here) return;
    await this.runtime.prepare(this.spec(host));
    if (!(await this.records.find(hostId))) await this.runtime.remove(hostId);
  }

  /** Hands the task runner the work of each kind. */
  register(): void {
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
      await this.resources.admitStart(current, actor, async () => {});
      await this.setStatus(current, { status: 'starting', last_error: null }, actor);
      const spec = this.spec(current);
      const { echoesOut } = await this.runtime.start(spec, upstream, progress, signal);
      this.current.set(current.id, upstream);
      // A policy set while the host started reached no running gateway: the started one follows it now.
      const policy = this.egressPolicyOf(await this.require(current.id));
      if (!isDeepStrictEqual(policy, spec.egressPolicy ?? null))
        await this.runtime.applyEgressPolicy(current.id, upstream, policy);
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
      this.records.fail(hostId!, code, message, actor);
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

  private spec(host: HostWithOwner): WorkspaceSpec {
    return {
      hostId: host.id,
      shortId: host.short_id,
      linuxUser: linuxUserFor(host.username),
      authorizedKey: host.gateway_public_key ?? '',
      desktopPassword: this.desktopPassword(host.id),
      limits: this.resources.limitsOf(host),
      egressPolicy: this.egressPolicyOf(host),
    };
  }

  private egressPolicyOf(host: HostWithOwner) {
    return gatewayPolicy(effectiveEgressPolicy(host, this.access.egressPolicyDefault));
  }

  // The records' reads and writes under the names the task bodies above use.
  private require(hostId: string): Promise<HostWithOwner> {
    return this.records.require(hostId);
  }

  private activeUpstream(hostId: string): Promise<UpstreamSpec | null> {
    return this.records.activeUpstream(hostId);
  }

  private setStatus(host: HostWithOwner, patch: HostPatch, actor: Actor, event?: StatusEvent) {
    return this.records.setStatus(host, patch, actor, event);
  }
}
