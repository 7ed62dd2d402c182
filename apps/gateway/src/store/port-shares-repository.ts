import type { Selectable } from 'kysely';
import type { Db } from './database.js';
import type { PortSharesTable } from './schema.js';

export type PortShareRow = Selectable<PortSharesTable>;

/** A share named for a user, with its host's short id and its owner as the account is now. */
export type SharedWithRow = PortShareRow & {
  host_short_id: string;
  owner_username: string;
  owner_status: 'active' | 'disabled';
  owner_expires_at: string | null;
};

/** Shared ports of workspaces (migration 0011). */
export class PortSharesRepository {
  constructor(private readonly db: Db) {}

  async insert(row: PortShareRow): Promise<void> {
    await this.db.insertInto('port_shares').values(row).execute();
  }

  async findById(id: string): Promise<PortShareRow | undefined> {
    return this.db.selectFrom('port_shares').selectAll().where('id', '=', id).executeTakeFirst();
  }

  async findByLabel(label: string): Promise<PortShareRow | undefined> {
    return this.db.selectFrom('port_shares').selectAll().where('label', '=', label).executeTakeFirst();
  }

  async findByListenPort(port: number): Promise<PortShareRow | undefined> {
    return this.db.selectFrom('port_shares').selectAll().where('listen_port', '=', port).executeTakeFirst();
  }

  async listByHost(hostId: string): Promise<PortShareRow[]> {
    return this.db
      .selectFrom('port_shares')
      .selectAll()
      .where('host_id', '=', hostId)
      .orderBy('created_at')
      .execute();
  }

  /** Shares whose named users include `userId` (ids are UUIDs: no LIKE wildcards in them), on existing hosts. */
  async listSharedWith(userId: string): Promise<SharedWithRow[]> {
    return this.db
      .selectFrom('port_shares')
      .innerJoin('hosts', 'hosts.id', 'port_shares.host_id')
      .innerJoin('users', 'users.id', 'hosts.user_id')
      .selectAll('port_shares')
      .select([
        'hosts.short_id as host_short_id',
        'users.username as owner_username',
        'users.status as owner_status',
        'users.expires_at as owner_expires_at',
      ])
      .where('port_shares.user_ids', 'like', `%${JSON.stringify(userId)}%`)
      .orderBy('port_shares.created_at')
      .execute();
  }

  /** The SHARE_PORTS ports shares hold now. */
  async listenPortsInUse(): Promise<number[]> {
    const rows = await this.db
      .selectFrom('port_shares')
      .select('listen_port')
      .where('listen_port', 'is not', null)
      .execute();
    return rows.map((row) => row.listen_port as number);
  }

  async count(): Promise<number> {
    const row = await this.db
      .selectFrom('port_shares')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .executeTakeFirst();
    return Number(row?.count ?? 0);
  }

  /** Removes the share; the row it was, or undefined when it was gone already. */
  async delete(id: string): Promise<PortShareRow | undefined> {
    return this.db.deleteFrom('port_shares').where('id', '=', id).returningAll().executeTakeFirst();
  }
}
