import type { Selectable } from 'kysely';
import { sql } from 'kysely';
import type { Db } from './database.js';
import type { NodesTable } from './schema.js';

export type NodeRow = Selectable<NodesTable>;
export type NodeWithLoad = NodeRow & { hosts: number; running: number };

export class NodesRepository {
  constructor(private readonly db: Db) {}

  /**
   * Registers `row` under its name, unless another process holds the name and heartbeated at or after
   * `aliveSince`. True when this process now holds it.
   */
  async claim(row: NodeRow, aliveSince: string): Promise<boolean> {
    const { name: _name, ...update } = row;
    const claimed = await this.db
      .insertInto('nodes')
      .values(row)
      .onConflict((conflict) =>
        conflict
          .column('name')
          .doUpdateSet(update)
          .where((eb) =>
            eb.or([
              eb('nodes.instance_id', '=', row.instance_id),
              eb('nodes.heartbeat_at', '<', aliveSince),
              eb('nodes.left_at', 'is not', null),
            ]),
          ),
      )
      .returning('name')
      .executeTakeFirst();
    return claimed !== undefined;
  }

  /** Says the node is alive; false when another process took the name meanwhile. */
  async heartbeat(name: string, instanceId: string, at: string, imagesReady: boolean): Promise<boolean> {
    const result = await this.db
      .updateTable('nodes')
      .set({ heartbeat_at: at, images_ready: imagesReady ? 1 : 0, left_at: null, silence_reported: 0 })
      .where('name', '=', name)
      .where('instance_id', '=', instanceId)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** A node shutting down says so: it counts as silent at once (placement skips it, its hosts wait for it). */
  async leave(name: string, instanceId: string): Promise<void> {
    await this.db
      .updateTable('nodes')
      .set({ left_at: new Date().toISOString() })
      .where('name', '=', name)
      .where('instance_id', '=', instanceId)
      .execute();
  }

  /** Takes the telling of a node's silence; true for the one gateway that should log it. */
  async claimSilence(name: string, aliveSince: string): Promise<boolean> {
    const result = await this.db
      .updateTable('nodes')
      .set({ silence_reported: 1 })
      .where('name', '=', name)
      .where('silence_reported', '=', 0)
      .where((eb) => eb.or([eb('heartbeat_at', '<', aliveSince), eb('left_at', 'is not', null)]))
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** Deletes a node that is silent or stopped; false when it is heartbeating (it came back meanwhile). */
  async removeSilent(name: string, aliveSince: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('nodes')
      .where('name', '=', name)
      .where((eb) => eb.or([eb('heartbeat_at', '<', aliveSince), eb('left_at', 'is not', null)]))
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  findByName(name: string): Promise<NodeRow | undefined> {
    return this.db.selectFrom('nodes').selectAll().where('name', '=', name).executeTakeFirst();
  }

  /** Every node with the hosts placed on it, by name. */
  async list(): Promise<NodeWithLoad[]> {
    const rows = await this.db
      .selectFrom('nodes')
      .leftJoin('hosts', 'hosts.node', 'nodes.name')
      .selectAll('nodes')
      .select((eb) => [
        eb.fn.count<number | string>('hosts.id').as('hosts'),
        sql<number | string>`sum(case when ${eb.ref('hosts.status')} = 'running' then 1 else 0 end)`.as(
          'running',
        ),
      ])
      .groupBy('nodes.name')
      .orderBy('nodes.name')
      .execute();
    return rows.map((row) => ({ ...row, hosts: Number(row.hosts), running: Number(row.running ?? 0) }));
  }
}
