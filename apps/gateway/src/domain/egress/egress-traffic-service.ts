import type { EgressTrafficHours, EgressTrafficQuery, EgressTrafficTotals } from '@ccp/api';
import { isoOut, nowIso, toIso } from '../../shared/clock.js';
import type {
  EgressTrafficRepository,
  TrafficTotals,
  TrafficWindow,
} from '../../store/egress-traffic-repository.js';
import { errors } from '../errors.js';

/** Whose figures a read may see: an admin's, everybody's; a user's, their own. */
export type TrafficScope = { role: 'admin' } | { role: 'user'; userId: string };

const moved = (row: { sent: number; received: number }) => ({
  sent_bytes: row.sent,
  received_bytes: row.received,
});

/** The egress meter's figures for the API (hourly rows and sums), within a window of hours. */
export class EgressTrafficService {
  constructor(private readonly traffic: EgressTrafficRepository) {}

  async totals(query: EgressTrafficQuery, scope: TrafficScope): Promise<EgressTrafficTotals> {
    const window = this.window(query, scope);
    const totals = await this.traffic.totals(window);
    const hosts = query.host_id ? totals.hosts.filter((row) => row.id === query.host_id) : totals.hosts;
    return {
      from: isoOut(window.from),
      to: isoOut(window.to),
      hosts: hosts.map((row) => ({ host_id: row.id, ...moved(row) })),
      egress_ips: totals.egressIps.map((row) => ({ egress_ip_id: row.id, ...moved(row) })),
      users: totals.users.map((row) => ({ user_id: row.id, ...moved(row) })),
    };
  }

  async hours(query: EgressTrafficQuery, scope: TrafficScope): Promise<EgressTrafficHours> {
    const window = this.window(query, scope);
    const rows = await this.traffic.hours({ ...window, ...(query.host_id ? { hostId: query.host_id } : {}) });
    return {
      from: isoOut(window.from),
      to: isoOut(window.to),
      hours: rows.map((row) => ({
        hour: isoOut(row.hour),
        host_id: row.hostId,
        egress_ip_id: row.egressIpId,
        user_id: row.userId,
        ...moved(row),
      })),
    };
  }

  /** Bytes per host and per egress IP since the figures began (what /metrics exports as counters). */
  async allTime(): Promise<Pick<TrafficTotals, 'hosts' | 'egressIps'>> {
    const totals = await this.traffic.totals({ from: '0000', to: '9999' });
    return { hosts: totals.hosts, egressIps: totals.egressIps };
  }

  async prune(retentionDays: number): Promise<number> {
    return this.traffic.deleteOlderThan(new Date(Date.now() - retentionDays * 86_400_000).toISOString());
  }

  private window(query: EgressTrafficQuery, scope: TrafficScope): TrafficWindow {
    const now = nowIso();
    const from = query.from ? toIso(query.from, 'from') : `${now.slice(0, 7)}-01T00:00:00.000Z`;
    const to = query.to ? toIso(query.to, 'to') : now;
    if (from >= to) throw errors.validation([{ field: 'from', message: 'must be before to' }]);
    return { from, to, ...(scope.role === 'user' ? { userId: scope.userId } : {}) };
  }
}
