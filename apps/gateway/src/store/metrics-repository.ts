import type { Db } from './database.js';

export interface MetricsCounts {
  hosts: Array<{ status: string; count: number }>;
  tasks: Array<{ kind: string; status: string; count: number }>;
  /** The last test of each egress IP that was tested (`last_test` is the stored EgressTestResult JSON). */
  egressTests: Array<{ id: string; label: string; lastTest: string }>;
}

/** Grouped counts the /metrics scrape reads; each is one indexed or small-table query. */
export class MetricsRepository {
  constructor(private readonly db: Db) {}

  async counts(): Promise<MetricsCounts> {
    const [hosts, tasks, egress] = await Promise.all([
      this.db
        .selectFrom('hosts')
        .select((eb) => ['status', eb.fn.countAll().as('count')])
        .groupBy('status')
        .execute(),
      this.db
        .selectFrom('tasks')
        .select((eb) => ['kind', 'status', eb.fn.countAll().as('count')])
        .groupBy(['kind', 'status'])
        .execute(),
      this.db
        .selectFrom('egress_ips')
        .select(['id', 'label', 'last_test'])
        .where('last_test', 'is not', null)
        .execute(),
    ]);
    return {
      hosts: hosts.map((r) => ({ status: r.status, count: Number(r.count) })),
      tasks: tasks.map((r) => ({ kind: r.kind, status: r.status, count: Number(r.count) })),
      egressTests: egress.map((r) => ({ id: r.id, label: r.label, lastTest: r.last_test as string })),
    };
  }
}
