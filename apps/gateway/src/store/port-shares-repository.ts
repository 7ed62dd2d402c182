import type { Selectable } from 'kysely';
import type { Db } from './database.js';
import type { PortSharesTable } from './schema.js';

export type PortShareRow = Selectable<PortSharesTable>;

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
