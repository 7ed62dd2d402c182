import type { Insertable, Selectable, Updateable } from 'kysely';
import type { Db } from './database.js';
import { constrained } from './errors.js';
import type { EgressIpsTable } from './schema.js';

export type EgressIpRow = Selectable<EgressIpsTable>;
export type EgressIpPatch = Updateable<Omit<EgressIpsTable, 'id' | 'created_at'>>;

export class EgressIpsRepository {
  constructor(private readonly db: Db) {}

  async insert(row: Insertable<EgressIpsTable>): Promise<EgressIpRow> {
    await this.db.insertInto('egress_ips').values(row).execute();
    return (await this.findById(row.id))!;
  }

  findById(id: string): Promise<EgressIpRow | undefined> {
    return this.db.selectFrom('egress_ips').selectAll().where('id', '=', id).executeTakeFirst();
  }

  list(): Promise<EgressIpRow[]> {
    return this.db
      .selectFrom('egress_ips')
      .selectAll()
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .execute();
  }

  async update(id: string, patch: EgressIpPatch): Promise<EgressIpRow | undefined> {
    await this.db.updateTable('egress_ips').set(patch).where('id', '=', id).execute();
    return this.findById(id);
  }

  /** Throws ConstraintViolation (`foreign_key`) while a binding still uses the egress IP. */
  async delete(id: string): Promise<boolean> {
    const result = await constrained(
      this.db.deleteFrom('egress_ips').where('id', '=', id).executeTakeFirst(),
    );
    return Number(result.numDeletedRows) > 0;
  }

  /** Running hosts bound to an egress IP (as active or standby), oldest binding first. */
  async runningHostIds(egressIpId: string): Promise<string[]> {
    const rows = await this.db
      .selectFrom('bindings')
      .innerJoin('hosts', 'hosts.id', 'bindings.host_id')
      .select('bindings.host_id')
      .where('bindings.egress_ip_id', '=', egressIpId)
      .where('hosts.status', '=', 'running')
      .orderBy('bindings.created_at', 'asc')
      .orderBy('bindings.id', 'asc')
      .execute();
    return rows.map((row) => row.host_id);
  }

  /** Host ids bound to each of the given egress IPs, oldest binding first. */
  async boundHostIds(egressIpIds: string[]): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>(egressIpIds.map((id) => [id, []]));
    if (egressIpIds.length === 0) return out;
    const rows = await this.db
      .selectFrom('bindings')
      .select(['egress_ip_id', 'host_id'])
      .where('egress_ip_id', 'in', egressIpIds)
      .orderBy('created_at', 'asc')
      .orderBy('id', 'asc')
      .execute();
    for (const row of rows) out.get(row.egress_ip_id)?.push(row.host_id);
    return out;
  }
}
