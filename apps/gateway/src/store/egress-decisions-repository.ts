import { sql } from 'kysely';
import type { Db } from './database.js';
import type { EgressDecisionsTable } from './schema.js';

export type StoredDecision = EgressDecisionsTable['decision'];

/** Decisions about one destination within one minute, as a round adds them. */
export interface DecisionSample {
  minute: string;
  decision: StoredDecision;
  destination: string;
  port: number;
  count: number;
  lastSeen: string;
}

/** What an `add` kept and what it left uncounted past the cap. */
export interface DecisionsAdded {
  counted: number;
  /** Distinct destinations (per minute) past the cap, and their decisions. */
  uncountedDestinations: number;
  uncounted: number;
}

/** A destination's decisions summed over a window. */
export interface DecisionTotal {
  decision: StoredDecision;
  destination: string;
  port: number;
  count: number;
  lastSeen: string;
}

export interface UncountedMinute {
  minute: string;
  destinations: number;
  count: number;
}

/** The egress policy's decisions per host and minute (migration 0013). */
export class EgressDecisionsRepository {
  constructor(private readonly db: Db) {}

  /**
   * Adds a round's counts of one host: to the minute's row of a destination it has, to a new row while the
   * minute has fewer than `cap` destinations, else to the minute's uncounted figure. A host's rounds run on
   * its one node, one after another, so the check of the cap and the inserts do not race.
   */
  async add(hostId: string, userId: string, samples: readonly DecisionSample[], cap: number) {
    const added: DecisionsAdded = { counted: 0, uncountedDestinations: 0, uncounted: 0 };
    const byMinute = new Map<string, DecisionSample[]>();
    for (const sample of samples)
      byMinute.set(sample.minute, [...(byMinute.get(sample.minute) ?? []), sample]);
    for (const [minute, rows] of byMinute) {
      const known = new Set(
        (
          await this.db
            .selectFrom('egress_decisions')
            .select(['decision', 'destination', 'port'])
            .where('host_id', '=', hostId)
            .where('minute', '=', minute)
            .execute()
        ).map((row) => `${row.decision} ${row.destination} ${row.port}`),
      );
      let uncountedDestinations = 0;
      let uncounted = 0;
      for (const sample of rows) {
        const key = `${sample.decision} ${sample.destination} ${sample.port}`;
        if (!known.has(key) && known.size >= cap) {
          uncountedDestinations += 1;
          uncounted += sample.count;
          continue;
        }
        known.add(key);
        await this.db
          .insertInto('egress_decisions')
          .values({
            minute,
            host_id: hostId,
            user_id: userId,
            decision: sample.decision,
            destination: sample.destination,
            port: sample.port,
            count: sample.count,
            last_seen: sample.lastSeen,
          })
          .onConflict((conflict) =>
            conflict.columns(['host_id', 'minute', 'decision', 'destination', 'port']).doUpdateSet({
              count: sql`egress_decisions.count + excluded.count`,
              last_seen: sql`case when excluded.last_seen > egress_decisions.last_seen then excluded.last_seen else egress_decisions.last_seen end`,
            }),
          )
          .execute();
        added.counted += sample.count;
      }
      if (uncounted === 0) continue;
      await this.db
        .insertInto('egress_decisions_uncounted')
        .values({ minute, host_id: hostId, destinations: uncountedDestinations, count: uncounted })
        .onConflict((conflict) =>
          conflict.columns(['host_id', 'minute']).doUpdateSet({
            destinations: sql`egress_decisions_uncounted.destinations + excluded.destinations`,
            count: sql`egress_decisions_uncounted.count + excluded.count`,
          }),
        )
        .execute();
      added.uncountedDestinations += uncountedDestinations;
      added.uncounted += uncounted;
    }
    return added;
  }

  /** One host's destinations since `from`, summed, the most recently seen first (at most `limit`). */
  async totals(hostId: string, from: string, limit: number): Promise<DecisionTotal[]> {
    const rows = await this.db
      .selectFrom('egress_decisions')
      .select([
        'decision',
        'destination',
        'port',
        sql<string | number>`sum(count)`.as('count'),
        sql<string>`max(last_seen)`.as('last_seen'),
      ])
      .where('host_id', '=', hostId)
      .where('minute', '>=', from)
      .groupBy(['decision', 'destination', 'port'])
      .orderBy(sql`max(last_seen)`, 'desc')
      .orderBy('destination')
      .orderBy('port')
      .limit(limit)
      .execute();
    return rows.map((row) => ({
      decision: row.decision,
      destination: row.destination,
      port: row.port,
      count: Number(row.count),
      lastSeen: row.last_seen,
    }));
  }

  /** One host's minutes since `from` that had decisions left uncounted, the latest first. */
  async uncounted(hostId: string, from: string): Promise<UncountedMinute[]> {
    const rows = await this.db
      .selectFrom('egress_decisions_uncounted')
      .selectAll()
      .where('host_id', '=', hostId)
      .where('minute', '>=', from)
      .orderBy('minute', 'desc')
      .limit(1440)
      .execute();
    return rows.map((row) => ({
      minute: row.minute,
      destinations: row.destinations,
      count: Number(row.count),
    }));
  }

  /** Decisions of every host since the figures began, per decision (what /metrics exports as counters). */
  async allTime(): Promise<Array<{ decision: StoredDecision; count: number }>> {
    const rows = await this.db
      .selectFrom('egress_decisions')
      .select(['decision', sql<string | number>`sum(count)`.as('count')])
      .groupBy('decision')
      .execute();
    return rows.map((row) => ({ decision: row.decision, count: Number(row.count) }));
  }

  async deleteOlderThan(cutoff: string): Promise<number> {
    const counted = await this.db
      .deleteFrom('egress_decisions')
      .where('minute', '<', cutoff)
      .executeTakeFirst();
    await this.db.deleteFrom('egress_decisions_uncounted').where('minute', '<', cutoff).execute();
    return Number(counted.numDeletedRows);
  }
}
