import type { EgressBudgetAction, EgressBudgetNotice, EgressBudgetScope } from '@ccp/api';
import type { Logger } from 'pino';
import type { EventBus } from '../../events/event-bus.js';
import { systemActor } from '../../events/event-bus.js';
import type { WorkspaceRuntime } from '../../runtime/workspace-runtime.js';
import { nowIso } from '../../shared/clock.js';
import type { EgressBudgetRow, EgressBudgetsRepository } from '../../store/egress-budgets-repository.js';
import type { EgressTrafficRepository } from '../../store/egress-traffic-repository.js';
import type { HostsRepository, HostWithOwner } from '../../store/hosts-repository.js';
import type { Access } from '../access/access.js';
import type { HostLifecycle } from '../hosts/host-lifecycle.js';
import { type AccessSettings, activeBinding, adminHostView } from '../hosts/host-view.js';
import type { TaskRunner } from '../tasks/task-runner.js';
import { monthOf } from './host-egress-state.js';
import type { EgressBudgetSettings } from './settings.js';

/** A budget as it applies: an admin's, or the gateway's default for a host without its own. */
export interface AppliedBudget extends EgressBudgetRow {
  scope: EgressBudgetScope;
  action: EgressBudgetAction;
  globalDefault: boolean;
}

export interface EgressBudgetRoundOptions {
  budgets: EgressBudgetsRepository;
  traffic: Pick<EgressTrafficRepository, 'totals'>;
  hosts: HostsRepository;
  runtime: Pick<WorkspaceRuntime, 'throttleEgress'>;
  lifecycle: Pick<HostLifecycle, 'stop'>;
  access: Pick<Access, 'system' | 'hostForSystem'>;
  tasks: Pick<TaskRunner, 'isBusy' | 'node'>;
  bus: EventBus;
  /** Writes a line to the host's attached SSH terminals and tmux clients; answers how many SSH terminals. */
  tell: (hostId: string, text: string) => Promise<number>;
  accessSettings: AccessSettings;
  settings: EgressBudgetSettings;
  log: Logger;
}

const SCOPE_TEXT: Record<EgressBudgetScope, string> = {
  host: "the host's",
  user: "its owner's",
  egress_ip: "its egress IP's",
};

/** Bytes as people read them: KiB, MiB, GiB. */
export function bytesText(bytes: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${bytes} bytes` : `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

/** What counts against a host: its own budget (else the gateway's default), its owner's, its egress IP's. */
export function budgetsOfHost(
  host: { id: string; user_id: string },
  egressIpId: string | null,
  budgets: readonly EgressBudgetRow[],
  settings: EgressBudgetSettings,
): AppliedBudget[] {
  const find = (scope: EgressBudgetScope, id: string | null) =>
    id === null ? undefined : budgets.find((b) => b.scope === scope && b.subjectId === id);
  const applied: AppliedBudget[] = [];
  const own = find('host', host.id);
  if (own) applied.push(asApplied(own, false));
  else if (settings.hostBytes > 0)
    applied.push({
      scope: 'host',
      subjectId: host.id,
      limitBytes: settings.hostBytes,
      warningPercent: settings.warningPercent,
      action: settings.action,
      throttleBytesPerSecond: settings.throttleBytesPerSecond,
      globalDefault: true,
    });
  for (const [scope, id] of [
    ['user', host.user_id],
    ['egress_ip', egressIpId],
  ] as const) {
    const budget = find(scope, id);
    if (budget) applied.push(asApplied(budget, false));
  }
  return applied;
}

const asApplied = (row: EgressBudgetRow, globalDefault: boolean): AppliedBudget => ({
  ...row,
  scope: row.scope as EgressBudgetScope,
  action: row.action as EgressBudgetAction,
  globalDefault,
});

/** Where a budget stands at `used` bytes. */
export function budgetState(budget: EgressBudgetRow, used: number): 'under' | 'warned' | 'reached' {
  if (used >= budget.limitBytes) return 'reached';
  return used * 100 >= budget.limitBytes * budget.warningPercent ? 'warned' : 'under';
}

/** This month's bytes (sent plus received) per host, user and egress IP, from the meter's hourly figures. */
export async function monthUse(traffic: Pick<EgressTrafficRepository, 'totals'>, month: string) {
  const totals = await traffic.totals({ from: `${month}-01T00:00:00.000Z`, to: '9999' });
  const sum = (rows: { id: string; sent: number; received: number }[]) =>
    new Map(rows.map((row) => [row.id, row.sent + row.received]));
  const use: Record<EgressBudgetScope, Map<string, number>> = {
    host: sum(totals.hosts),
    user: sum(totals.users),
    egress_ip: sum(totals.egressIps),
  };
  return (scope: EgressBudgetScope, id: string) => use[scope].get(id) ?? 0;
}

/**
 * The round that holds this node's running hosts to their monthly egress budgets, after each meter sample:
 * users are told once a month when a budget passes its warning share and when it reaches its limit (an event,
 * the host's view on the live stream, a line in attached terminals and tmux); at the limit a `throttle` budget
 * holds the host to its rate in its egress gateway (lifted at the new month or when no reached budget asks
 * for it any more, as when it was raised), a `stop` budget stops it with an ordinary stop task.
 */
export class EgressBudgetRound {
  private running: Promise<void> | null = null;
  private next: Promise<void> | null = null;

  constructor(private readonly options: EgressBudgetRoundOptions) {}

  /**
   * One round. Rounds never overlap: one asked for while another runs follows it (once, for all who asked), so
   * it sees what changed meanwhile, such as a budget just raised.
   */
  round(): Promise<void> {
    if (!this.running) {
      this.running = this.roundNow().finally(() => {
        this.running = null;
      });
      return this.running;
    }
    this.next ??= this.running
      .catch(() => undefined)
      .then(() => {
        this.next = null;
        return this.round();
      });
    return this.next;
  }

  private async roundNow(): Promise<void> {
    const { budgets, hosts, tasks, settings, log } = this.options;
    const now = nowIso();
    const month = monthOf(now);
    const used = await monthUse(this.options.traffic, month);
    const rows = await budgets.list();
    const hostsHere = await hosts.list({ node: tasks.node });
    const running = hostsHere.filter((host) => host.status === 'running');
    const bindings = await hosts.bindings(running.map((host) => host.id));
    // Budgets whose warning share or limit this round was first to pass: all their hosts are told.
    const passed = new Map<string, 'warned' | 'reached' | null>();
    for (const host of running) {
      try {
        const egressIpId = activeBinding(bindings.get(host.id) ?? [])?.egress_ip_id ?? null;
        let throttle: number | null = null;
        let stopBy: AppliedBudget | null = null;
        let passedAny = false;
        for (const budget of budgetsOfHost(host, egressIpId, rows, settings)) {
          const use = used(budget.scope, budget.subjectId);
          const state = budgetState(budget, use);
          if (state === 'under') continue;
          passedAny = true;
          const key = `${budget.scope}/${budget.subjectId}`;
          if (!passed.has(key)) passed.set(key, await this.mark(budget, state, month, now));
          const told = passed.get(key);
          if (told) await this.tell(host, budget, told, use, month);
          if (state !== 'reached') continue;
          if (budget.action === 'throttle')
            throttle = Math.min(throttle ?? Number.POSITIVE_INFINITY, budget.throttleBytesPerSecond);
          if (budget.action === 'stop') stopBy ??= budget;
        }
        // Raised or removed since: the banner goes (with the throttle's event, or on its own).
        const cleared = !passedAny && host.egress_budget_notice !== null;
        if (cleared) await hosts.update(host.id, { egress_budget_notice: null });
        if (stopBy) await this.stop(host, stopBy);
        else if (!(await this.throttle(host, throttle)) && cleared)
          this.options.bus.notify({ type: 'host.status_changed', host: await this.view(host.id) });
      } catch (error) {
        log.warn({ err: error, hostId: host.id }, 'the egress budget round failed for a host');
      }
    }
    // A stopped host keeps no throttle: its next start begins unthrottled until a round finds it over again.
    for (const host of hostsHere)
      if (host.status !== 'running' && host.egress_throttle_bytes_per_second !== null)
        await hosts.update(host.id, { egress_throttle_bytes_per_second: null });
  }

  /** Records that the budget passed its share or limit this month; answers what users are to be told now. */
  private async mark(budget: AppliedBudget, state: 'warned' | 'reached', month: string, now: string) {
    const { budgets } = this.options;
    if (state === 'reached') {
      // Reached at once: the warning is spent with it.
      await budgets.mark(budget.scope, budget.subjectId, month, 'warned_at', now);
      return (await budgets.mark(budget.scope, budget.subjectId, month, 'reached_at', now)) ? state : null;
    }
    return (await budgets.mark(budget.scope, budget.subjectId, month, 'warned_at', now)) ? state : null;
  }

  private async tell(
    host: HostWithOwner,
    budget: AppliedBudget,
    state: 'warned' | 'reached',
    used: number,
    month: string,
  ): Promise<void> {
    const { bus, hosts } = this.options;
    const whose = SCOPE_TEXT[budget.scope];
    const limit = bytesText(budget.limitBytes);
    const text =
      state === 'warned'
        ? `host ${host.short_id} has used ${bytesText(used)} of ${whose} egress budget of ${limit} for ${month} ` +
          `(warning at ${budget.warningPercent} %); at the limit ${ACTION_AHEAD[budget.action](budget)}`
        : `host ${host.short_id} reached ${whose} egress budget of ${limit} for ${month}: ` +
          ACTION_NOW[budget.action](budget);
    const notice: EgressBudgetNotice = {
      state,
      scope: budget.scope,
      subject_id: budget.subjectId,
      action: budget.action,
      used_bytes: used,
      limit_bytes: budget.limitBytes,
      month,
      message: text,
      at: nowIso(),
    };
    await hosts.update(host.id, { egress_budget_notice: JSON.stringify(notice) });
    const told = await this.options.tell(host.id, text);
    const data = {
      scope: budget.scope,
      subject_id: budget.subjectId,
      action: budget.action,
      used_bytes: used,
      limit_bytes: budget.limitBytes,
      month,
      terminals_told: told,
    };
    const event = {
      level: 'warn' as const,
      message: text,
      actor: systemActor,
      userId: host.user_id,
      hostId: host.id,
      data,
      host: await this.view(host.id),
    };
    await bus.emit(
      state === 'warned'
        ? { type: 'host.egress_budget_warning', ...event }
        : { type: 'host.egress_budget_reached', ...event },
    );
  }

  /**
   * Sets the host's throttle to `rate` (null lifts it); the limit is checked for each round it holds. Answers
   * whether it changed (and an event with the host's view was sent).
   */
  private async throttle(host: HostWithOwner, rate: number | null): Promise<boolean> {
    const current =
      host.egress_throttle_bytes_per_second === null ? null : Number(host.egress_throttle_bytes_per_second);
    if (rate === null && current === null) return false;
    if (!(await this.options.runtime.throttleEgress(host.id, rate))) return false;
    if (rate === current) return false;
    const { hosts, bus } = this.options;
    await hosts.update(host.id, { egress_throttle_bytes_per_second: rate });
    const common = { actor: systemActor, userId: host.user_id, hostId: host.id };
    if (rate === null) {
      await bus.emit({
        type: 'host.egress_throttle_lifted',
        message: `host ${host.short_id}: its egress is no longer throttled`,
        ...common,
        data: { bytes_per_second: current! },
        host: await this.view(host.id),
      });
    } else {
      await bus.emit({
        type: 'host.egress_throttled',
        level: 'warn',
        message: `host ${host.short_id}: its egress is throttled to ${bytesText(rate)}/s each way for a reached budget`,
        ...common,
        data: { bytes_per_second: rate },
        host: await this.view(host.id),
      });
    }
    return true;
  }

  private async stop(host: HostWithOwner, budget: AppliedBudget): Promise<void> {
    const { access, lifecycle, bus, tasks, hosts } = this.options;
    if (await tasks.isBusy(host.id)) return;
    await hosts.update(host.id, { policy_stop_reason: 'egress_budget' });
    const grant = await access.hostForSystem(access.system('egress budget'), host.id);
    const { task_id } = await lifecycle.stop(grant);
    await bus.emit({
      type: 'host.policy_stop',
      message: `host ${host.short_id} stopping: it reached ${SCOPE_TEXT[budget.scope]} egress budget of ${bytesText(budget.limitBytes)}`,
      actor: systemActor,
      userId: host.user_id,
      hostId: host.id,
      data: { reason: 'egress_budget', task_id, last_activity_at: null },
    });
  }

  private async view(hostId: string) {
    const row = await this.options.hosts.findById(hostId);
    if (!row) throw new Error(`host ${hostId} is gone`);
    return adminHostView(this.options.hosts, row, this.options.accessSettings);
  }
}

const ACTION_AHEAD: Record<EgressBudgetAction, (budget: AppliedBudget) => string> = {
  notify: () => 'nothing is held back, admins are told',
  throttle: (b) => `its traffic is held to ${bytesText(b.throttleBytesPerSecond)}/s until the month ends`,
  stop: () => 'the host stops',
};

const ACTION_NOW: Record<EgressBudgetAction, (budget: AppliedBudget) => string> = {
  notify: () => 'nothing is held back, admins are told',
  throttle: (b) =>
    `its traffic is now held to ${bytesText(b.throttleBytesPerSecond)}/s each way until the month ends or the budget is raised`,
  stop: () => 'the host stops now (reason egress_budget)',
};
