import { type Insertable, type Selectable, sql, type Updateable } from 'kysely';
import type { Db } from './database.js';
import { constrained } from './errors.js';
import type { HostsTable, IsoTime } from './schema.js';

export type HostRow = Selectable<HostsTable>;
/** A host with its owner's name and resource defaults (a host's own resources fall back to them). */
export type HostWithOwner = HostRow & {
  username: string;
  owner_default_cpus: number | null;
  owner_default_memory_mb: number | null;
  owner_default_pids: number | null;
  owner_default_home_mb: number | null;
  /** JSON of the owner's default egress policy. */
  owner_egress_policy: string | null;
};
export type HostPatch = Updateable<Omit<HostsTable, 'id' | 'created_at' | 'short_id' | 'user_id'>>;

export interface BindingDetail {
  id: string;
  host_id: string;
  egress_ip_id: string;
  label: string;
  ip_address: string;
  created_at: string;
  /** False once the egress IP's last test failed; a standby then takes over. */
  healthy: boolean;
}

export class HostsRepository {
  constructor(private readonly db: Db) {}

  /** Throws ConstraintViolation (`unique`) for a short ID already taken. */
  async insert(row: Insertable<HostsTable>): Promise<void> {
    await constrained(this.db.insertInto('hosts').values(row).execute());
  }

  private withOwner() {
    return this.db
      .selectFrom('hosts')
      .innerJoin('users', 'users.id', 'hosts.user_id')
      .selectAll('hosts')
      .select([
        'users.username',
        'users.default_cpus as owner_default_cpus',
        'users.default_memory_mb as owner_default_memory_mb',
        'users.default_pids as owner_default_pids',
        'users.default_home_mb as owner_default_home_mb',
        'users.egress_policy as owner_egress_policy',
      ]);
  }

  findById(id: string): Promise<HostWithOwner | undefined> {
    return this.withOwner().where('hosts.id', '=', id).executeTakeFirst();
  }

  findByShortId(shortId: string): Promise<HostWithOwner | undefined> {
    return this.withOwner().where('hosts.short_id', '=', shortId).executeTakeFirst();
  }

  list(filter: { userId?: string; statuses?: string[]; node?: string } = {}): Promise<HostWithOwner[]> {
    let query = this.withOwner();
    if (filter.node) query = query.where('hosts.node', '=', filter.node);
    if (filter.userId) query = query.where('hosts.user_id', '=', filter.userId);
    if (filter.statuses) query = query.where('hosts.status', 'in', filter.statuses);
    return query.orderBy('hosts.created_at', 'desc').orderBy('hosts.id', 'desc').execute();
  }

  async update(id: string, patch: HostPatch): Promise<void> {
    await this.db.updateTable('hosts').set(patch).where('id', '=', id).execute();
  }

  /**
   * Applies the patch only while the columns in `seen` still hold what the caller read them as (a compare and
   * set: a decision made on that read is not written over a change made since); answers whether it was applied.
   */
  async updateIfUnchanged(id: string, seen: Partial<HostRow>, patch: HostPatch): Promise<boolean> {
    let query = this.db.updateTable('hosts').set(patch).where('id', '=', id);
    for (const [column, value] of Object.entries(seen) as [
      keyof HostsTable & string,
      string | number | null,
    ][])
      query = value === null ? query.where(column, 'is', null) : query.where(column, '=', value);
    const result = await query.executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /**
   * A person's input reached these hosts through a session: their last activity, unless a newer one is known
   * (ISO times in one format compare as text on both databases). Stopped hosts are left as they are.
   */
  async recordSessionInput(hostIds: string[], at: IsoTime): Promise<void> {
    if (hostIds.length === 0) return;
    await this.db
      .updateTable('hosts')
      .set({ last_activity_at: at, last_activity_signal: 'session' })
      .where('id', 'in', hostIds)
      .where('status', '=', 'running')
      .where((eb) => eb.or([eb('last_activity_at', 'is', null), eb('last_activity_at', '<', at)]))
      .execute();
  }

  async delete(id: string): Promise<boolean> {
    const result = await this.db.deleteFrom('hosts').where('id', '=', id).executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /** Bindings of the given hosts with their egress IP's label and address, oldest first. */
  async bindings(hostIds: string[]): Promise<Map<string, BindingDetail[]>> {
    const out = new Map<string, BindingDetail[]>(hostIds.map((id) => [id, []]));
    if (hostIds.length === 0) return out;
    const rows = await this.db
      .selectFrom('bindings')
      .innerJoin('egress_ips', 'egress_ips.id', 'bindings.egress_ip_id')
      .select([
        'bindings.id',
        'bindings.host_id',
        'bindings.egress_ip_id',
        'bindings.created_at',
        'egress_ips.label',
        'egress_ips.ip_address',
        'egress_ips.last_test_ok',
      ])
      .where('bindings.host_id', 'in', hostIds)
      .orderBy('bindings.created_at', 'asc')
      .orderBy('bindings.id', 'asc')
      .execute();
    for (const { last_test_ok, ...row } of rows)
      out.get(row.host_id)?.push({ ...row, healthy: last_test_ok !== 0 });
    return out;
  }

  /** Throws ConstraintViolation: `unique` when the pair is already bound. */
  async insertBinding(row: {
    id: string;
    host_id: string;
    egress_ip_id: string;
    created_at: string;
  }): Promise<void> {
    await constrained(this.db.insertInto('bindings').values(row).execute());
  }

  findBinding(id: string) {
    return this.db.selectFrom('bindings').selectAll().where('id', '=', id).executeTakeFirst();
  }

  async deleteBinding(id: string): Promise<void> {
    await this.db.deleteFrom('bindings').where('id', '=', id).execute();
  }

  /**
   * Marks the hosts of a node that went silent `node_unavailable`, keeping what they were; answers the ones this
   * call changed (several gateways may notice at once: each host is reported by one).
   */
  async markNodeUnavailable(node: string, at: string): Promise<string[]> {
    const rows = await this.db
      .updateTable('hosts')
      .set((eb) => ({
        status_before_node_loss: eb.ref('status'),
        status: 'node_unavailable',
        updated_at: at,
      }))
      .where('node', '=', node)
      .where('status', '!=', 'node_unavailable')
      .returning('id')
      .execute();
    return rows.map((row) => row.id);
  }

  /** The ids of the hosts placed on a node. */
  async idsOnNode(node: string): Promise<string[]> {
    const rows = await this.db.selectFrom('hosts').select('id').where('node', '=', node).execute();
    return rows.map((row) => row.id);
  }

  /**
   * Places a host of a removed node on another one, stopped, with the reason as its last error; false when it
   * is no longer on that node.
   */
  async moveFromRemovedNode(
    hostId: string,
    from: string,
    to: string,
    reason: string,
    at: string,
  ): Promise<boolean> {
    const result = await this.db
      .updateTable('hosts')
      .set({ node: to, status: 'stopped', status_before_node_loss: null, last_error: reason, updated_at: at })
      .where('id', '=', hostId)
      .where('node', '=', from)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** Gives the hosts of a returning node back the status they had; answers their ids. */
  async restoreFromNodeLoss(node: string, at: string): Promise<string[]> {
    const rows = await this.db
      .updateTable('hosts')
      .set((eb) => ({
        status: eb.fn.coalesce('status_before_node_loss', sql<string>`'stopped'`),
        status_before_node_loss: null,
        updated_at: at,
      }))
      .where('node', '=', node)
      .where('status', '=', 'node_unavailable')
      .returning('id')
      .execute();
    return rows.map((row) => row.id);
  }

  /** Hosts made before nodes existed belong to the first node that starts on the database. */
  async adoptUnplaced(node: string): Promise<number> {
    const result = await this.db
      .updateTable('hosts')
      .set({ node })
      .where('node', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  /** Hosts bound to an egress IP. */
  async hostIdsBoundTo(egressIpId: string): Promise<string[]> {
    const rows = await this.db
      .selectFrom('bindings')
      .select('host_id')
      .where('egress_ip_id', '=', egressIpId)
      .execute();
    return rows.map((r) => r.host_id);
  }
}
