import type { Kysely } from 'kysely';

/**
 * What each host may reach through its upstream: a host's own egress policy and a user's default for their hosts,
 * as JSON of an EgressPolicy (null: the next level's, up to the gateway's EGRESS_POLICY).
 */
export const egressPolicyPerHost = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const table of ['hosts', 'users'])
      await db.schema.alterTable(table).addColumn('egress_policy', 'text').execute();
  },
};
