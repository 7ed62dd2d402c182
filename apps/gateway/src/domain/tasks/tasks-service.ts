import type { Task } from '@ccp/api';
import type { TasksRepository } from '../../store/tasks-repository.js';
import { type TaskGrant, taskOf } from '../access/grants.js';
import { taskView } from './task-runner.js';

/** Reads tasks; they are written by the task runner. */
export class TasksService {
  constructor(private readonly tasks: TasksRepository) {}

  async list(query: { limit?: number; status?: string; host_id?: string }): Promise<Task[]> {
    const rows = await this.tasks.list({
      limit: query.limit ?? 100,
      ...(query.status ? { status: query.status } : {}),
      ...(query.host_id ? { hostId: query.host_id.toLowerCase() } : {}),
    });
    return rows.map(taskView);
  }

  /** A task its grant's holder may read (Access.requireTask). */
  get(grant: TaskGrant): Task {
    return taskView(taskOf(grant));
  }
}
