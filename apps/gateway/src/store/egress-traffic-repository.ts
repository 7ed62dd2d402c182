import { sql } from 'kysely';
import type { Db } from './database.js';

/** Bytes one host moved through one egress IP within one hour. */
export interface TrafficSample {
  hour: string;
  hostId: string;
  egressIpId: string;
  userId: string;
  sent: number;
  received: number;
}

export interface TrafficTotal {
  id: string;
  sent: number;
  received: number;
}

export interface TrafficTotals {
  hosts: TrafficTotal[];
  egressIps: TrafficTotal[];
  users: TrafficTotal[];
}

/** Which rows a read covers: `[from, to)` by hour, and optionally one user's. */
export interface TrafficWindow {
  from: string;
  to: string;
  userId?: string;
}

const sums = [
  sql<string | number>`coalesce(sum(bytes_sent), 0)`.as('sent'),
  sql<string | number>`coalesce(sum(bytes_received), 0)`.as('received'),
];

/** The egress meter's hourly figures (migration 0010). */
export class EgressTrafficRepository {
  constructor(private readonly db: Db) {}

  /** Adds to the hour's row of each host and egress IP (one statement each, so two gateways may add at once). */
  async add(samples: readonly TrafficSample[]): Promise<void> {
    for (const sample of samples) {
      await this.db
        .insertInto('egress_traffic')
        .values({
          hour: sample.hour,
          host_id: sample.hostId,
          egress_ip_id: sample.egressIpId,
          user_id: sample.userId,
          bytes_sent: sample.sent,
          bytes_received: sample.received,
        })
        .onConflict((conflict) =>
          conflict.columns(['hour', 'host_id', 'egress_ip_id']).doUpdateSet({
            bytes_sent: sql`egress_traffic.bytes_sent + excluded.bytes_sent`,
            bytes_received: sql`egress_traffic.bytes_received + excluded.bytes_received`,
          }),
        )
        .execute();
    }
  }

  /** Sums per host, per egress IP and per user over a window. */
  async totals(window: TrafficWindow): Promise<TrafficTotals> {
    const grouped = async (column: 'host_id' | 'egress_ip_id' | 'user_id') => {
      let query = this.db
        .selectFrom('egress_traffic')
        .select([sql<string>`${sql.ref(column)}`.as('id'), ...sums])
        .where('hour', '>=', window.from)
        .where('hour', '<', window.to);
      if (window.userId !== undefined) query = query.where('user_id', '=', window.userId);
      const rows = await query.groupBy(column).orderBy(column).execute();
      return rows.map((row) => ({ id: row.id, sent: Number(row.sent), received: Number(row.received) }));
    };
    const [hosts, egressIps, users] = await Promise.all([
      grouped('host_id'),
      grouped('egress_ip_id'),
      grouped('user_id'),
    ]);
    return { hosts, egressIps, users };
  }

  /** Every hour's row in a window, oldest first; one host's when `hostId` is given. */
  async hours(window: TrafficWindow & { hostId?: string }): Promise<TrafficSample[]> {
    let query = this.db
      .selectFrom('egress_traffic')
      .selectAll()
      .where('hour', '>=', window.from)
      .where('hour', '<', window.to);
    if (window.userId !== undefined) query = query.where('user_id', '=', window.userId);
    if (window.hostId !== undefined) query = query.where('host_id', '=', window.hostId);
    const rows = await query.orderBy('hour').orderBy('host_id').orderBy('egress_ip_id').execute();
    return rows.map((row) => ({
      hour: row.hour,
      hostId: row.host_id,
      egressIpId: row.egress_ip_id,
      userId: row.user_id,
      sent: Number(row.bytes_sent),
      received: Number(row.bytes_received),
    }));
  }

  async deleteOlderThan(cutoff: string): Promise<number> {
    const result = await this.db.deleteFrom('egress_traffic').where('hour', '<', cutoff).executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
