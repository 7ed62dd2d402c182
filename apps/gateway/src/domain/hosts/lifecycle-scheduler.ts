import type { LifecyclePolicy, StopReason } from '@ccp/api';
import type { Logger } from 'pino';
import type { EventBus } from '../../events/event-bus.js';
import { systemActor } from '../../events/event-bus.js';
import type { WorkspaceActivityProbe, WorkspaceActivitySample } from '../../runtime/workspace-activity.js';
import type { ClusterBus } from '../../shared/cluster-messages.js';
import type { HostPatch, HostsRepository, HostWithOwner } from '../../store/hosts-repository.js';
import type { UsersRepository } from '../../store/users-repository.js';
import type { Access } from '../access/access.js';
import { DomainError } from '../errors.js';
import type { TaskRunner } from '../tasks/task-runner.js';
import type { HostLifecycle } from './host-lifecycle.js';
import { type AccessSettings, adminHostView, portalHostUrl } from './host-view.js';
import {
  type ActivityThresholds,
  activityOf,
  effectivePolicy,
  nextScheduled,
  type PlannedStop,
  plannedStop,
  scheduledStartDue,
  stopDecision,
} from './lifecycle-policy.js';
import { isoOf, msOf, policyOf } from './lifecycle-state.js';

/** The gateway's settings of hosts' lifecycle policy. */
export interface HostLifecycleSettings {
  /** The global default: what a host and its owner leave unset (HOST_IDLE_TIMEOUT_SECONDS, …, HOST_SCHEDULE). */
  defaults: LifecyclePolicy;
  /** How long before a policy stop users are told (HOST_STOP_WARNING_SECONDS). */
  warningSeconds: number;
  /** How far an extend holds stops off when it does not say (HOST_EXTEND_SECONDS). */
  extendSeconds: number;
  /** Seconds between rounds (HOST_ACTIVITY_SECONDS); 0 turns the policy off. */
  roundSeconds: number;
  thresholds: ActivityThresholds;
}

export interface LifecycleSchedulerOptions {
  hosts: HostsRepository;
  users: Pick<UsersRepository, 'findById'>;
  lifecycle: Pick<HostLifecycle, 'start' | 'stop'>;
  access: Pick<Access, 'system' | 'hostForSystem'>;
  tasks: Pick<TaskRunner, 'isBusy' | 'node'>;
  bus: EventBus;
  probe: WorkspaceActivityProbe;
  /** Writes a line to this gateway's SSH terminals of a host; answers how many (SshProxy.tellSessions). */
  tellSessions: (hostId: string, text: string) => number;
  /** The other gateways on the database, whose SSH sessions to a host are told of its coming stop too. */
  cluster: Pick<ClusterBus, 'publish' | 'subscribe'>;
  accessSettings: AccessSettings;
  settings: HostLifecycleSettings;
  log: Logger;
  /** The clock (tests move a fake one). */
  now?: () => number;
}

const REASON_TEXT: Record<StopReason, string> = {
  idle: 'idle: no input in a session, terminal output, CPU or network use for its idle timeout',
  lifetime: 'lifetime: it ran for its maximum lifetime',
  schedule: 'schedule: its weekly schedule stops it',
  egress_budget: 'egress_budget: it reached its monthly egress budget (an admin raises it)',
};

/** What a refused SSH login or a stopped session is told of a policy stop (ccp repeats it). */
export function policyStopText(reason: StopReason): string {
  return REASON_TEXT[reason];
}

/**
 * The rounds of hosts' lifecycle policy on this node: each running host's activity is read (tmux output, CPU and
 * network counters; a person's input in a session is recorded by the gateway it came in at: session-input.ts), its planned stop worked out, users warned ahead and the host stopped by an
 * ordinary stop task when it comes; stopped hosts start at their schedule's times. The decisions are
 * lifecycle-policy.ts's; the stops and starts are HostLifecycle's, asked with a system grant.
 */
export class LifecycleScheduler {
  private readonly now: () => number;
  /** The previous reading of each running host, for CPU and network rates. */
  private readonly samples = new Map<string, WorkspaceActivitySample & { at: number }>();
  private lastRound: number | null = null;
  private inRound = false;

  constructor(private readonly options: LifecycleSchedulerOptions) {
    this.now = options.now ?? Date.now;
  }

  /**
   * A start begins a new run: the last policy stop's reason, an extend and a warning of the run before are
   * forgotten (its activity stays: it is older than the start, which plans count from).
   */
  follow(): void {
    // Another gateway told the host's users something: the sessions attached here see the line as well.
    this.options.cluster.subscribe('host.terminal_notice', ({ hostId, text }) => {
      this.options.tellSessions(hostId, text);
    });
    this.options.bus.on('host.started', async ({ hostId }) => {
      if (!hostId) return;
      await this.options.hosts.update(hostId, {
        policy_stop_reason: null,
        stop_extended_until: null,
        stop_warned_at: null,
        planned_start_at: null,
      });
    });
  }

  /** One round over this node's hosts; a round still under way is not run twice. */
  async round(): Promise<void> {
    if (this.inRound) return;
    this.inRound = true;
    try {
      const now = this.now();
      const since = this.lastRound ?? now;
      this.lastRound = now;
      const { hosts, tasks, log } = this.options;
      const seen = new Set<string>();
      for (const host of await hosts.list({ node: tasks.node })) {
        seen.add(host.id);
        try {
          if (await tasks.isBusy(host.id)) continue;
          const policy = await this.policyOf(host);
          if (host.status === 'running') await this.runningHost(host, policy, now);
          else if (host.status === 'stopped' || host.status === 'created')
            await this.stoppedHost(host, policy, since, now);
        } catch (error) {
          log.warn({ err: error, hostId: host.id }, 'the lifecycle policy round failed for a host');
        }
      }
      for (const hostId of this.samples.keys()) if (!seen.has(hostId)) this.samples.delete(hostId);
    } finally {
      this.inRound = false;
    }
  }

  private async policyOf(host: HostWithOwner) {
    const user = await this.options.users.findById(host.user_id);
    const none = { idle_timeout_seconds: null, max_lifetime_seconds: null, schedule: null };
    return effectivePolicy(policyOf(host), user ? policyOf(user) : none, this.options.settings.defaults);
  }

  private async runningHost(host: HostWithOwner, policy: ReturnType<typeof effectivePolicy>, now: number) {
    const { probe, settings } = this.options;
    const sample = await probe.sample(host.id);
    if (!sample) return; // not running here after all: the host check deals with it
    const previous = this.samples.get(host.id);
    this.samples.set(host.id, { ...sample, at: now });
    const comparable = previous && previous.pid === sample.pid;
    const elapsedSeconds = comparable ? (now - previous.at) / 1000 : 0;
    const known = msOf(host.last_activity_at);
    const reading = {
      terminalOutputAt: null,
      cpu:
        comparable && previous.cpuSeconds !== null && sample.cpuSeconds !== null
          ? { usedSeconds: Math.max(0, sample.cpuSeconds - previous.cpuSeconds), elapsedSeconds }
          : null,
      networkBytes:
        comparable && previous.networkBytes !== null && sample.networkBytes !== null
          ? Math.max(0, sample.networkBytes - previous.networkBytes)
          : null,
    };
    // The terminals are asked (a command in the workspace, the round's dearest read) only when CPU and network
    // showed nothing: activity seen now is the latest there can be.
    const activity =
      activityOf(reading, now, known, settings.thresholds) ??
      activityOf(
        { ...reading, terminalOutputAt: await probe.terminalOutputAt(host.id) },
        now,
        known,
        settings.thresholds,
      );
    const newer = activity && (known === null || activity.at > known) ? activity : null;
    const lastActivityAt = newer?.at ?? known;
    const plan = plannedStop(policy, {
      startedAt: msOf(host.started_at) ?? now,
      lastActivityAt,
      extendedUntil: msOf(host.stop_extended_until),
    });
    let warnedAt = msOf(host.stop_warned_at);
    // The plan moved out of the warning time (activity came back, an extend): the next approach warns again.
    if (warnedAt !== null && (!plan || now < plan.at - settings.warningSeconds * 1000)) warnedAt = null;
    const decision = stopDecision(plan, warnedAt, now, settings.warningSeconds);
    const stopAt = (p: PlannedStop | null, warned: number | null) =>
      p && warned !== null ? Math.max(p.at, warned + settings.warningSeconds * 1000) : (p?.at ?? null);
    const patch: HostPatch = {
      ...(newer ? { last_activity_at: isoOf(newer.at), last_activity_signal: newer.signal } : {}),
      planned_stop_at: isoOf(decision.action === 'warn' ? decision.stopAt : stopAt(plan, warnedAt)),
      planned_stop_reason: plan?.reason ?? null,
      stop_warned_at: isoOf(decision.action === 'warn' ? now : warnedAt),
      planned_start_at: null,
    };
    if (decision.action === 'stop') patch.policy_stop_reason = decision.reason;
    const written = await this.write(host, patch);
    if (written === 'moved') return;
    if (decision.action === 'warn') {
      await this.warn(host, plan!.reason, decision.stopAt);
      // The warning time counts from when the last user was told, not from when the round began; an extend
      // asked meanwhile took the warning back, and stays so.
      await this.options.hosts.updateIfUnchanged(
        host.id,
        { stop_extended_until: host.stop_extended_until, stop_warned_at: patch.stop_warned_at },
        { stop_warned_at: isoOf(this.now()) },
      );
    } else if (decision.action === 'stop') await this.stop(host, decision.reason, lastActivityAt);
    else if (written === 'written') await this.notify(host.id);
  }

  private async stoppedHost(
    host: HostWithOwner,
    policy: ReturnType<typeof effectivePolicy>,
    since: number,
    now: number,
  ) {
    const next = policy.schedule ? nextScheduled(policy.schedule, 'start', now) : null;
    const written = await this.write(host, {
      planned_start_at: isoOf(next),
      planned_stop_at: null,
      planned_stop_reason: null,
      stop_warned_at: null,
    });
    if (written === 'moved') return;
    if (!scheduledStartDue(policy.schedule, since, now)) {
      if (written === 'written') await this.notify(host.id);
      return;
    }
    const { access, lifecycle, bus } = this.options;
    const grant = await access.hostForSystem(access.system('scheduled start'), host.id);
    try {
      const { task_id } = await lifecycle.start(grant);
      await bus.emit({
        type: 'host.scheduled_start',
        message: `host ${host.short_id} starting: its weekly schedule starts it now`,
        actor: systemActor,
        userId: host.user_id,
        hostId: host.id,
        data: { task_id },
      });
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      await bus.emit({
        type: 'host.scheduled_start_failed',
        level: 'warn',
        message: `host ${host.short_id} could not start on its schedule: ${error.message}`,
        actor: systemActor,
        userId: host.user_id,
        hostId: host.id,
        data: { code: error.code, error: error.message },
      });
    }
  }

  /**
   * Writes a line to the host's attached SSH terminals at every gateway and its tmux clients (stop warnings,
   * the budgets and the pause tell users this way); answers how many SSH terminals of this gateway got it.
   */
  async tellUsers(hostId: string, text: string): Promise<number> {
    const { probe, log, cluster } = this.options;
    const told = this.options.tellSessions(hostId, text);
    await cluster
      .publish('host.terminal_notice', { hostId, text })
      .catch((error: unknown) => log.warn({ err: error, hostId }, 'other gateways were not told'));
    await probe
      .tellTerminals(hostId, text)
      .catch((error: unknown) => log.debug({ err: error, hostId }, 'tmux did not take the notice'));
    return told;
  }

  /** Tells users of a coming stop: an event (and with it a live message), their SSH terminals, tmux clients. */
  private async warn(host: HostWithOwner, reason: StopReason, stopAt: number): Promise<void> {
    const { bus, accessSettings } = this.options;
    const minutes = Math.max(1, Math.round((stopAt - this.now()) / 60_000));
    const text =
      `host ${host.short_id} stops in about ${minutes} min at ${isoOf(stopAt)} (${REASON_TEXT[reason]}); ` +
      `to keep it running: \`ccp extend\`, or Extend at ${portalHostUrl(accessSettings, host.id)}`;
    const told = await this.tellUsers(host.id, text);
    await bus.emit({
      type: 'host.stop_warning',
      level: 'warn',
      message: text,
      actor: systemActor,
      userId: host.user_id,
      hostId: host.id,
      data: { reason, stop_at: isoOf(stopAt)!, terminals_told: told },
      host: await this.view(host.id),
    });
  }

  private async stop(host: HostWithOwner, reason: StopReason, lastActivityAt: number | null): Promise<void> {
    const { access, lifecycle, bus } = this.options;
    const grant = await access.hostForSystem(access.system(`lifecycle policy: ${reason}`), host.id);
    const { task_id } = await lifecycle.stop(grant);
    await bus.emit({
      type: 'host.policy_stop',
      message: `host ${host.short_id} stopping: ${REASON_TEXT[reason]}`,
      actor: systemActor,
      userId: host.user_id,
      hostId: host.id,
      data: { reason, task_id, last_activity_at: isoOf(lastActivityAt) },
    });
  }

  /**
   * Writes what changed of the patch, unless the host moved since the round read it (started or stopped, its
   * policy set, an extend, a warning): the round's decision was made on the old row, and the next round decides
   * again on the new one. Without this an extend asked while a round read the host's terminals was written over,
   * and the host stopped at the stop it had just been kept from.
   */
  private async write(host: HostWithOwner, patch: HostPatch): Promise<'written' | 'unchanged' | 'moved'> {
    const row = host as unknown as Record<string, unknown>;
    const changes = Object.entries(patch).filter(([key, value]) => row[key] !== value);
    if (changes.length === 0) return 'unchanged';
    const seen = {
      status: host.status,
      updated_at: host.updated_at,
      stop_extended_until: host.stop_extended_until,
      stop_warned_at: host.stop_warned_at,
    };
    const applied = await this.options.hosts.updateIfUnchanged(
      host.id,
      seen,
      Object.fromEntries(changes) as HostPatch,
    );
    return applied ? 'written' : 'moved';
  }

  private async notify(hostId: string): Promise<void> {
    this.options.bus.notify({ type: 'host.status_changed', host: await this.view(hostId) });
  }

  private async view(hostId: string) {
    const row = await this.options.hosts.findById(hostId);
    if (!row) throw new Error(`host ${hostId} is gone`);
    return adminHostView(this.options.hosts, row, this.options.accessSettings);
  }
}
