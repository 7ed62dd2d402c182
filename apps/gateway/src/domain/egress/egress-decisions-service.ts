import type { EgressDecisions, EgressDecisionsQuery, EgressPolicy } from '@ccp/api';
import { isoOut, toIso } from '../../shared/clock.js';
import type { EgressDecisionsRepository } from '../../store/egress-decisions-repository.js';
import { type HostGrant, hostOf } from '../access/grants.js';
import { allowListFrom } from './allow-list.js';
import { effectiveEgressPolicy, gatewayPolicy } from './egress-policy.js';

/** Destinations a read lists at most. */
const MAX_DESTINATIONS = 500;

/** A host's blocked (or would-be-blocked) destinations for the API, and the log as an allow-list. */
export class EgressDecisionsService {
  constructor(
    private readonly decisions: EgressDecisionsRepository,
    /** The gateway's policy (EGRESS_POLICY), which hosts without their own or their owner's follow. */
    private readonly gatewayDefault: () => EgressPolicy | null,
  ) {}

  async read(grant: HostGrant, query: EgressDecisionsQuery): Promise<EgressDecisions> {
    const host = hostOf(grant, 'view');
    const from = query.from ? toIso(query.from, 'from') : new Date(Date.now() - 86_400_000).toISOString();
    const [totals, uncounted] = await Promise.all([
      this.decisions.totals(host.id, from, MAX_DESTINATIONS),
      this.decisions.uncounted(host.id, from),
    ]);
    return {
      host_id: host.id,
      from: isoOut(from),
      destinations: totals.map((row) => ({
        destination: row.destination,
        port: row.port,
        decision: row.decision,
        count: row.count,
        last_seen: isoOut(row.lastSeen),
      })),
      uncounted: uncounted.map((row) => ({
        minute: isoOut(row.minute),
        destinations: row.destinations,
        count: row.count,
      })),
      allow_list: allowListFrom(totals, gatewayPolicy(effectiveEgressPolicy(host, this.gatewayDefault()))),
    };
  }

  /** Decisions of all hosts since the figures began, per decision (/metrics). */
  allTime() {
    return this.decisions.allTime();
  }

  async prune(retentionDays: number): Promise<number> {
    return this.decisions.deleteOlderThan(new Date(Date.now() - retentionDays * 86_400_000).toISOString());
  }
}
