import type { EgressBudget, EgressBudgetList, EgressBudgetRequest, EgressBudgetScope } from '@ccp/api';
import { isoOut, nowIso } from '../../shared/clock.js';
import type { EgressBudgetsRepository } from '../../store/egress-budgets-repository.js';
import type { EgressIpsRepository } from '../../store/egress-ips-repository.js';
import type { EgressTrafficRepository } from '../../store/egress-traffic-repository.js';
import type { HostsRepository } from '../../store/hosts-repository.js';
import type { UsersRepository } from '../../store/users-repository.js';
import { errors } from '../errors.js';
import { type AppliedBudget, budgetState, monthUse } from './egress-budget-round.js';
import { monthOf } from './host-egress-state.js';
import type { EgressBudgetSettings } from './settings.js';

/** Admins' monthly egress budgets: set, read with this month's use, removed; a change is enforced at once. */
export class EgressBudgetsService {
  constructor(
    private readonly budgets: EgressBudgetsRepository,
    private readonly traffic: Pick<EgressTrafficRepository, 'totals'>,
    private readonly subjects: {
      hosts: Pick<HostsRepository, 'findById' | 'list'>;
      users: Pick<UsersRepository, 'findById'>;
      egressIps: Pick<EgressIpsRepository, 'findById'>;
    },
    private readonly settings: EgressBudgetSettings,
    /** The budget round: a changed budget (a raised limit lifts a throttle) takes effect without waiting. */
    private readonly enforce: () => Promise<void>,
  ) {}

  /** Every budget set, and the gateway's default for each host without its own, with this month's use. */
  async list(): Promise<EgressBudgetList> {
    const month = monthOf(nowIso());
    const rows = await this.budgets.list();
    const applied: AppliedBudget[] = rows.map((row) => ({
      ...row,
      scope: row.scope as EgressBudgetScope,
      action: row.action as AppliedBudget['action'],
      globalDefault: false,
    }));
    if (this.settings.hostBytes > 0) {
      const own = new Set(rows.filter((row) => row.scope === 'host').map((row) => row.subjectId));
      for (const host of await this.subjects.hosts.list())
        if (!own.has(host.id)) applied.push(this.globalDefault(host.id));
    }
    return { budgets: await this.views(applied, month) };
  }

  async get(scope: EgressBudgetScope, subjectId: string): Promise<EgressBudget> {
    await this.requireSubject(scope, subjectId);
    const row = await this.budgets.find(scope, subjectId);
    const budget: AppliedBudget | null = row
      ? { ...row, scope, action: row.action as AppliedBudget['action'], globalDefault: false }
      : scope === 'host' && this.settings.hostBytes > 0
        ? this.globalDefault(subjectId)
        : null;
    if (!budget) throw errors.notFound('egress budget');
    const [view] = await this.views([budget], monthOf(nowIso()));
    return view!;
  }

  async put(
    scope: EgressBudgetScope,
    subjectId: string,
    request: EgressBudgetRequest,
  ): Promise<EgressBudget> {
    await this.requireSubject(scope, subjectId);
    const month = monthOf(nowIso());
    const before = await this.budgets.find(scope, subjectId);
    await this.budgets.put(
      {
        scope,
        subjectId,
        limitBytes: request.limit_bytes,
        warningPercent: request.warning_percent ?? this.settings.warningPercent,
        action: request.action,
        throttleBytesPerSecond: request.throttle_bytes_per_second ?? this.settings.throttleBytesPerSecond,
      },
      nowIso(),
    );
    // A new or raised limit is warned of and reached afresh this month.
    if (!before || request.limit_bytes > before.limitBytes)
      await this.budgets.clearMarks(scope, subjectId, month);
    await this.enforce();
    return this.get(scope, subjectId);
  }

  async delete(scope: EgressBudgetScope, subjectId: string): Promise<void> {
    if (!(await this.budgets.delete(scope, subjectId))) throw errors.notFound('egress budget');
    await this.budgets.clearMarks(scope, subjectId, monthOf(nowIso()));
    await this.enforce();
  }

  private globalDefault(hostId: string): AppliedBudget {
    return {
      scope: 'host',
      subjectId: hostId,
      limitBytes: this.settings.hostBytes,
      warningPercent: this.settings.warningPercent,
      action: this.settings.action,
      throttleBytesPerSecond: this.settings.throttleBytesPerSecond,
      globalDefault: true,
    };
  }

  private async views(budgets: AppliedBudget[], month: string): Promise<EgressBudget[]> {
    const used = await monthUse(this.traffic, month);
    const marks = new Map(
      (await this.budgets.marks(month)).map((mark) => [`${mark.scope}/${mark.subject_id}`, mark]),
    );
    return budgets.map((budget) => {
      const use = used(budget.scope, budget.subjectId);
      const mark = marks.get(`${budget.scope}/${budget.subjectId}`);
      return {
        scope: budget.scope,
        subject_id: budget.subjectId,
        limit_bytes: budget.limitBytes,
        warning_percent: budget.warningPercent,
        action: budget.action,
        throttle_bytes_per_second: budget.throttleBytesPerSecond,
        global_default: budget.globalDefault,
        month,
        used_bytes: use,
        state: budgetState(budget, use),
        warned_at: isoOut(mark?.warned_at ?? null),
        reached_at: isoOut(mark?.reached_at ?? null),
      };
    });
  }

  private async requireSubject(scope: EgressBudgetScope, id: string): Promise<void> {
    const found =
      scope === 'host'
        ? await this.subjects.hosts.findById(id)
        : scope === 'user'
          ? await this.subjects.users.findById(id)
          : await this.subjects.egressIps.findById(id);
    if (!found) throw errors.notFound(scope === 'egress_ip' ? 'egress IP' : scope);
  }
}
