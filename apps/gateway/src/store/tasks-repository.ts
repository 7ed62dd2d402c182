import type { Insertable, Selectable, Updateable } from 'kysely';
import type { Db } from './database.js';
import type { TasksTable } from './schema.js';

export type TaskRow = Selectable<TasksTable>;
export type TaskPatch = Updateable<Omit<TasksTable, 'id' | 'created_at' | 'kind'>>;

export class TasksRepository {
  constructor(private readonly db: Db) {}

  async insert(row: Insertable<TasksTable>): Promise<TaskRow> {
    await this.db.insertInto('tasks').values(row).execute();
    return (await this.findById(row.id))!;
  }

  findById(id: string): Promise<TaskRow | undefined> {
    return this.db.selectFrom('tasks').selectAll().where('id', '=', id).executeTakeFirst();
  }

  async update(id: string, patch: TaskPatch): Promise<TaskRow> {
    await this.db.updateTable('tasks').set(patch).where('id', '=', id).execute();
    return (await this.findById(id))!;
  }

  /** The unfinished task of a host, if any. */
  findActiveForHost(hostId: string): Promise<TaskRow | undefined> {
    return this.db
      .selectFrom('tasks')
      .selectAll()
      .where('host_id', '=', hostId)
      .where('status', 'in', ['pending', 'running'])
      .executeTakeFirst();
  }

  list(filter: { limit: number; status?: string; hostId?: string }): Promise<TaskRow[]> {
    let query = this.db.selectFrom('tasks').selectAll();
    if (filter.status) query = query.where('status', '=', filter.status as TaskRow['status']);
    if (filter.hostId) query = query.where('host_id', '=', filter.hostId);
    return query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(filter.limit).execute();
  }

  listUnfinished(): Promise<TaskRow[]> {
    return this.db.selectFrom('tasks').selectAll().where('status', 'in', ['pending', 'running']).execute();
  }
}
