import type { Insertable, Selectable, Updateable } from 'kysely';
import type { Db } from './database.js';
import type { DialectKind } from './dialect.js';
import { constrained } from './errors.js';
import type { TasksTable } from './schema.js';

export type TaskRow = Selectable<TasksTable>;
export type TaskPatch = Updateable<Omit<TasksTable, 'id' | 'created_at' | 'kind'>>;

const UNFINISHED = ['pending', 'running'] as const;

export class TasksRepository {
  constructor(
    private readonly db: Db,
    private readonly dialect: DialectKind,
  ) {}

  /** Throws ConstraintViolation (`unique`) while the host has an unfinished task: one per host, for every gateway. */
  async insert(row: Insertable<TasksTable>): Promise<TaskRow> {
    await constrained(this.db.insertInto('tasks').values(row).execute());
    return (await this.findById(row.id))!;
  }

  findById(id: string): Promise<TaskRow | undefined> {
    return this.db.selectFrom('tasks').selectAll().where('id', '=', id).executeTakeFirst();
  }

  async update(id: string, patch: TaskPatch): Promise<TaskRow> {
    await this.db.updateTable('tasks').set(patch).where('id', '=', id).execute();
    return (await this.findById(id))!;
  }

  /** The user's hosts whose start (or bootstrap) task is queued or running. */
  async hostsWithStartUnderway(userId: string): Promise<string[]> {
    const rows = await this.db
      .selectFrom('tasks')
      .select('host_id')
      .where('user_id', '=', userId)
      .where('kind', 'in', ['start', 'bootstrap'])
      .where('status', 'in', UNFINISHED)
      .execute();
    return rows.flatMap((row) => (row.host_id ? [row.host_id] : []));
  }

  /** The unfinished task of a host, if any. */
  findActiveForHost(hostId: string): Promise<TaskRow | undefined> {
    return this.db
      .selectFrom('tasks')
      .selectAll()
      .where('host_id', '=', hostId)
      .where('status', 'in', UNFINISHED)
      .executeTakeFirst();
  }

  list(filter: { limit: number; status?: string; hostId?: string }): Promise<TaskRow[]> {
    let query = this.db.selectFrom('tasks').selectAll();
    if (filter.status) query = query.where('status', '=', filter.status as TaskRow['status']);
    if (filter.hostId) query = query.where('host_id', '=', filter.hostId);
    return query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(filter.limit).execute();
  }

  /** Fails every unfinished task of a node (one removed for good); answers the rows as they now are. */
  async failUnfinishedOfNode(node: string, patch: TaskPatch): Promise<TaskRow[]> {
    return this.db
      .updateTable('tasks')
      .set(patch)
      .where('node', '=', node)
      .where('status', 'in', UNFINISHED)
      .returningAll()
      .execute();
  }

  /** Tasks a node took and did not finish (tasks from before nodes existed count as its own). */
  listUnfinishedClaimed(node: string): Promise<TaskRow[]> {
    return this.db
      .selectFrom('tasks')
      .selectAll()
      .where('status', 'in', UNFINISHED)
      .where((eb) => eb.or([eb('node', '=', node), eb('node', 'is', null)]))
      .where((eb) => eb.or([eb('claimed_at', 'is not', null), eb('node', 'is', null)]))
      .execute();
  }

  /**
   * Takes up to `limit` queued tasks of `node`, oldest first. On PostgreSQL the rows are locked and skipped by
   * any other process claiming at the same time, so each task is taken once.
   */
  async claimQueued(node: string, at: string, limit: number): Promise<TaskRow[]> {
    const queued = this.db
      .selectFrom('tasks')
      .select('id')
      .where('node', '=', node)
      .where('status', '=', 'pending')
      .where('claimed_at', 'is', null)
      .orderBy('created_at')
      .limit(limit);
    return this.db
      .updateTable('tasks')
      .set({ claimed_at: at })
      .where('id', 'in', this.dialect === 'postgres' ? queued.forUpdate().skipLocked() : queued)
      .where('claimed_at', 'is', null)
      .returningAll()
      .execute();
  }

  /** Fails a task no node has taken yet; false when a node took it first. */
  async failUnclaimed(id: string, patch: TaskPatch): Promise<TaskRow | undefined> {
    return this.db
      .updateTable('tasks')
      .set(patch)
      .where('id', '=', id)
      .where('status', '=', 'pending')
      .where('claimed_at', 'is', null)
      .returningAll()
      .executeTakeFirst();
  }

  /** Asks the node running a task to cancel it (the first reason given stays). */
  async requestCancel(id: string, reason: string): Promise<void> {
    await this.db
      .updateTable('tasks')
      .set({ cancel_reason: reason })
      .where('id', '=', id)
      .where('status', 'in', UNFINISHED)
      .where('cancel_reason', 'is', null)
      .execute();
  }

  /** Of the given tasks, those someone asked to cancel, with the reason. */
  async cancelRequests(ids: string[]): Promise<Map<string, string>> {
    if (ids.length === 0) return new Map();
    const rows = await this.db
      .selectFrom('tasks')
      .select(['id', 'cancel_reason'])
      .where('id', 'in', ids)
      .where('cancel_reason', 'is not', null)
      .execute();
    return new Map(rows.map((row) => [row.id, row.cancel_reason ?? '']));
  }
}
