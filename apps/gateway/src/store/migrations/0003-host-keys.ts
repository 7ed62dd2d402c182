import type { Kysely } from 'kysely';

/** The gateway's own key pair per host, used to log in to the workspace's sshd; users' secrets never go there. */
export const hostKeys = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('hosts').addColumn('gateway_key_sealed', 'text').execute();
    await db.schema.alterTable('hosts').addColumn('gateway_public_key', 'text').execute();
  },
};
