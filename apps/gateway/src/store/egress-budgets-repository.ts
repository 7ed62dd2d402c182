import type { Selectable } from 'kysely';
import type { Db } from './database.js';
import type { EgressBudgetMarksTable, EgressBudgetsTable } from './schema.js';

export interface EgressBudgetRow {
  scope: string;
  subjectId: string;
  limitBytes: number;
  warningPercent: number;
  action: string;
  throttleBytesPerSecond: number;
}

export type EgressBudgetMark = Selectable<EgressBudgetMarksTable>;

const budgetOf = (row: Selectable<EgressBudgetsTable>): EgressBudgetRow => ({
  scope: row.scope,
  subjectId: row.subject_id,
  limitBytes: Number(row.limit_bytes),
  warningPercent: row.warning_percent,
  action: row.action,
  throttleBytesPerSecond: Number(row.throttle_bytes_per_second),
});

/** Monthly egress budgets and, per month, when each one's warning share and limit were passed (migration 0014). */
export class EgressBudgetsRepository {
  constructor(private readonly db: Db) {}

  async list(): Promise<EgressBudgetRow[]> {
    const rows = await this.db
      .selectFrom('egress_budgets')
      .selectAll()
      .orderBy('scope')
      .orderBy('subject_id')
      .execute();
    return rows.map(budgetOf);
  }

  async find(scope: string, subjectId: string): Promise<EgressBudgetRow | null> {
    const row = await this.db
      .selectFrom('egress_budgets')
      .selectAll()
      .where('scope', '=', scope)
      .where('subject_id', '=', subjectId)
      .executeTakeFirst();
    return row ? budgetOf(row) : null;
  }

  async put(budget: EgressBudgetRow, updatedAt: string): Promise<void> {
    const values = {
      limit_bytes: budget.limitBytes,
      warning_percent: budget.warningPercent,
      action: budget.action,
      throttle_bytes_per_second: budget.throttleBytesPerSecond,
      updated_at: updatedAt,
    };
    await this.db
      .insertInto('egress_budgets')
      .values({ scope: budget.scope, subject_id: budget.subjectId, ...values })
      .onConflict((conflict) => conflict.columns(['scope', 'subject_id']).doUpdateSet(values))
      .execute();
  }

  async delete(scope: string, subjectId: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('egress_budgets')
      .where('scope', '=', scope)
      .where('subject_id', '=', subjectId)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  async marks(month: string): Promise<EgressBudgetMark[]> {
    return this.db.selectFrom('egress_budget_marks').selectAll().where('month', '=', month).execute();
  }

  /** Records a passed warning share or limit; answers false when another round (or gateway) recorded it first. */
  async mark(scope: string, subjectId: string, month: string, what: 'warned_at' | 'reached_at', at: string) {
    await this.db
      .insertInto('egress_budget_marks')
      .values({ scope, subject_id: subjectId, month, warned_at: null, reached_at: null })
      .onConflict((conflict) => conflict.columns(['scope', 'subject_id', 'month']).doNothing())
      .execute();
    const result = await this.db
      .updateTable('egress_budget_marks')
      .set({ [what]: at })
      .where('scope', '=', scope)
      .where('subject_id', '=', subjectId)
      .where('month', '=', month)
      .where(what, 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** Forgets a budget's marks of a month: a raised limit is warned of and reached afresh. */
  async clearMarks(scope: string, subjectId: string, month: string): Promise<void> {
    await this.db
      .deleteFrom('egress_budget_marks')
      .where('scope', '=', scope)
      .where('subject_id', '=', subjectId)
      .where('month', '=', month)
      .execute();
  }
}
