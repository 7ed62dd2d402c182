import { sql } from 'kysely';
import type { Db } from './database.js';

export interface StoredCounts {
  users: { total: number; active: number; disabled: number; expired: number };
  hosts: { total: number; running: number; stopped: number; failed: number };
  egressIps: { total: number; bound: number; failing: number };
  tasks: { pending: number; running: number; failed24h: number };
}

const count = (expr: ReturnType<typeof sql>) =>
  sql<string | number>`coalesce(sum(case when ${expr} then 1 else 0 end), 0)`;

export class StatsRepository {
  constructor(private readonly db: Db) {}

  async counts(now: string, dayAgo: string): Promise<StoredCounts> {
    const [users, hosts, egress, tasks] = await Promise.all([
      this.db
        .selectFrom('users')
        .select((eb) => [
          eb.fn.countAll().as('total'),
          count(sql`status = 'active' and (expires_at is null or expires_at > ${now})`).as('active'),
          count(sql`status = 'disabled'`).as('disabled'),
          count(sql`expires_at is not null and expires_at <= ${now}`).as('expired'),
        ])
        .executeTakeFirstOrThrow(),
      this.db
        .selectFrom('hosts')
        .select((eb) => [
          eb.fn.countAll().as('total'),
          count(sql`status = 'running'`).as('running'),
          count(sql`status in ('stopped', 'created')`).as('stopped'),
          count(sql`status = 'failed'`).as('failed'),
        ])
        .executeTakeFirstOrThrow(),
      this.db
        .selectFrom('egress_ips')
        .select((eb) => [
          eb.fn.countAll().as('total'),
          count(sql`exists (select 1 from bindings b where b.egress_ip_id = egress_ips.id)`).as('bound'),
          count(sql`last_test_ok = 0`).as('failing'),
        ])
        .executeTakeFirstOrThrow(),
      this.db
        .selectFrom('tasks')
        .select(() => [
          count(sql`status = 'pending'`).as('pending'),
          count(sql`status = 'running'`).as('running'),
          count(sql`status = 'failed' and finished_at >= ${dayAgo}`).as('failed24h'),
        ])
        .executeTakeFirstOrThrow(),
    ]);
    return {
      users: {
        total: Number(users.total),
        active: Number(users.active),
        disabled: Number(users.disabled),
        expired: Number(users.expired),
      },
      hosts: {
        total: Number(hosts.total),
        running: Number(hosts.running),
        stopped: Number(hosts.stopped),
        failed: Number(hosts.failed),
      },
      egressIps: {
        total: Number(egress.total),
        bound: Number(egress.bound),
        failing: Number(egress.failing),
      },
      tasks: {
        pending: Number(tasks.pending),
        running: Number(tasks.running),
        failed24h: Number(tasks.failed24h),
      },
    };
  }
}
