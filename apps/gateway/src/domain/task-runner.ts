import { randomUUID } from 'node:crypto';
import type { Actor, Task, TaskKind } from '@ccp/api';
import type { Logger } from 'pino';
import type { EventBus } from '../events/event-bus.js';
import { systemActor } from '../events/event-bus.js';
import type { TaskRow, TasksRepository } from '../store/tasks-repository.js';
import { isoOut, nowIso } from './clock.js';
import { DomainError, errors } from './errors.js';

/** A task's work; `signal` aborts when the task is cancelled (only for `cancellable` requests). */
export type TaskWork = (
  progress: (percent: number, stage: string) => Promise<void>,
  signal: AbortSignal,
) => Promise<string>;

export interface TaskRequest {
  kind: TaskKind;
  /** The host worked on; null for work on no host (an image build), which holds one lock of its own. */
  hostId: string | null;
  userId: string | null;
  actor: Actor;
  work: TaskWork;
  /** A stop or delete of the host may end it (a start waiting on an upstream that never answers). */
  cancellable?: boolean;
  /**
   * Called when the task failed, after the row is written (the host's status follows it). Not called for a
   * cancelled task: whoever cancelled it takes the host over.
   */
  onFailure?: (code: string, message: string) => Promise<void>;
}

interface RunningTask {
  /** The task's row. */
  id: string;
  /** Settles once the task's row holds its outcome. */
  done: Promise<void>;
  /** Present while the task may be cancelled. */
  cancel?: AbortController;
}

export function taskView(row: TaskRow): Task {
  return {
    id: row.id,
    kind: row.kind,
    host_id: row.host_id,
    user_id: row.user_id,
    status: row.status,
    progress: row.progress,
    stage: row.stage,
    message: row.message,
    error: row.error_code ? { code: row.error_code, message: row.error_message ?? '' } : null,
    requested_by: row.requested_by,
    created_at: isoOut(row.created_at),
    started_at: isoOut(row.started_at),
    finished_at: isoOut(row.finished_at),
  };
}

/** Who asked for a stop: an admin or a user by name, or the gateway itself (an account disabled or expired). */
export type StopRequester = { kind: 'admin' | 'user'; username: string } | { kind: 'system' };

/** The lock of work on no host (image builds): one at a time, beside any host's task. */
const NO_HOST = 'no-host';

const requester = (actor: Actor) =>
  actor.kind === 'system' ? 'system' : `${actor.kind}:${actor.username ?? actor.id}`;

/** Persisted host tasks: at most one unfinished per host, progress streamed, every outcome logged. */
export class TaskRunner {
  private readonly running = new Map<string, RunningTask>();

  constructor(
    private readonly tasks: TasksRepository,
    private readonly bus: EventBus,
    private readonly log: Logger,
  ) {}

  async submit(request: TaskRequest): Promise<TaskRow> {
    const { hostId } = request;
    const lock = hostId ?? NO_HOST;
    // A task of this gateway, or one another gateway on the same database runs for the host.
    const existing =
      this.running.has(lock) || !hostId ? undefined : await this.tasks.findActiveForHost(hostId);
    const busy = this.running.get(lock)?.id ?? existing?.id;
    if (busy) {
      if (!hostId)
        throw errors.conflict('images_busy', 'An image build is already running', { task_id: busy });
      throw errors.conflict('host_busy', 'A task is already running for this host', { task_id: busy });
    }
    // Claim the host before the first await below, so a concurrent request sees it busy.
    const id = randomUUID();
    let release!: () => void;
    const cancel = request.cancellable ? new AbortController() : undefined;
    this.running.set(lock, {
      id,
      done: new Promise<void>((resolve) => {
        release = resolve;
      }),
      ...(cancel ? { cancel } : {}),
    });
    try {
      const row = await this.tasks.insert({
        id,
        kind: request.kind,
        host_id: hostId,
        user_id: request.userId,
        status: 'pending',
        progress: 0,
        stage: 'queued',
        message: '',
        error_code: null,
        error_message: null,
        requested_by: requester(request.actor),
        created_at: nowIso(),
        started_at: null,
        finished_at: null,
      });
      this.notify(row, 'task.queued');
      setImmediate(() => {
        this.execute(row, request, cancel?.signal ?? new AbortController().signal)
          .catch((error: unknown) =>
            this.log.error({ err: error, taskId: row.id }, 'task bookkeeping failed'),
          )
          .finally(() => {
            this.running.delete(lock);
            release();
          });
      });
      return row;
    } catch (error) {
      this.running.delete(lock);
      release();
      throw error;
    }
  }

  /** Resolves when no task is running (shutdown, tests). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running.values()].map((task) => task.done));
  }

  /** Waits for the task of one host, if any, to end. */
  async idleFor(hostId: string): Promise<void> {
    await this.running.get(hostId)?.done;
  }

  /**
   * Cancels the host's task if it may be cancelled, and waits until it has unwound and its row says
   * `failed` with `cancelled` (the message: `why`, and who asked). Another kind of task is left running.
   */
  async cancel(hostId: string, why: string, actor: Actor): Promise<void> {
    for (let task = this.running.get(hostId); task?.cancel; task = this.running.get(hostId)) {
      task.cancel.abort(`${why} (${requester(actor)})`);
      await task.done;
    }
  }

  /**
   * Who stopped a host, when its newest task is a stop (the one that left it stopped or is stopping it): the
   * requester as the task recorded it, and when it was asked. Null when something else left it so.
   */
  async lastStop(hostId: string): Promise<{ by: StopRequester; at: string } | null> {
    const [latest] = await this.tasks.list({ hostId, limit: 1 });
    if (latest?.kind !== 'stop') return null;
    const [kind, ...name] = latest.requested_by.split(':');
    const by: StopRequester =
      kind === 'admin' || kind === 'user' ? { kind, username: name.join(':') } : { kind: 'system' };
    return { by, at: isoOut(latest.created_at) };
  }

  isBusy(hostId: string): boolean {
    return this.running.has(hostId);
  }

  /** A task left unfinished by a crash is failed as interrupted at the next start. */
  async failInterrupted(): Promise<TaskRow[]> {
    const leftovers = await this.tasks.listUnfinished();
    const failed: TaskRow[] = [];
    for (const task of leftovers) {
      const row = await this.tasks.update(task.id, {
        status: 'failed',
        error_code: 'interrupted',
        error_message: 'The gateway stopped while this task was running',
        finished_at: nowIso(),
      });
      failed.push(row);
      await this.bus.emit({
        type: 'task.interrupted',
        level: 'warn',
        message: `${task.kind} task interrupted by a gateway restart`,
        actor: systemActor,
        userId: task.user_id,
        hostId: task.host_id,
        taskId: task.id,
        task: taskView(row),
      });
    }
    return failed;
  }

  private async execute(task: TaskRow, request: TaskRequest, signal: AbortSignal): Promise<void> {
    let row = await this.tasks.update(task.id, {
      status: 'running',
      stage: 'starting',
      started_at: nowIso(),
    });
    this.notify(row, 'task.progressed');
    let lastNotified = 0;
    const progress = async (percent: number, stage: string) => {
      row = await this.tasks.update(task.id, {
        progress: Math.max(0, Math.min(100, Math.round(percent))),
        stage,
      });
      // Progress ticks go to live clients only; the event log gets the outcome.
      if (Date.now() - lastNotified > 100 || percent >= 100) {
        lastNotified = Date.now();
        this.notify(row, 'task.progressed');
      }
    };
    try {
      const message = await request.work(progress, signal);
      row = await this.tasks.update(task.id, {
        status: 'succeeded',
        progress: 100,
        stage: 'done',
        message,
        finished_at: nowIso(),
      });
      await this.bus.emit({
        type: `task.${request.kind}.succeeded`,
        message: `${task.kind} task succeeded: ${message}`,
        actor: request.actor,
        userId: request.userId,
        hostId: request.hostId,
        taskId: task.id,
        task: taskView(row),
      });
    } catch (error) {
      if (signal.aborted) {
        await this.cancelled(task, request, String(signal.reason));
        return;
      }
      // Any domain error (a runtime failure, a rule such as no_egress_bound) names its own code.
      const code = error instanceof DomainError ? error.code : 'internal';
      const message = error instanceof Error ? error.message : String(error);
      if (!(error instanceof DomainError))
        this.log.error({ err: error, taskId: task.id }, 'task failed unexpectedly');
      row = await this.tasks.update(task.id, {
        status: 'failed',
        error_code: code,
        error_message: message,
        finished_at: nowIso(),
      });
      await this.bus.emit({
        type: `task.${request.kind}.failed`,
        level: 'error',
        message: `${task.kind} task failed (${code}): ${message}`,
        actor: request.actor,
        userId: request.userId,
        hostId: request.hostId,
        taskId: task.id,
        data: { code },
        task: taskView(row),
      });
      await request.onFailure?.(code, message);
    }
  }

  /** A cancelled task fails with `cancelled`: the contract knows no other end for a task than success and failure. */
  private async cancelled(task: TaskRow, request: TaskRequest, reason: string): Promise<void> {
    const row = await this.tasks.update(task.id, {
      status: 'failed',
      error_code: 'cancelled',
      error_message: reason,
      finished_at: nowIso(),
    });
    await this.bus.emit({
      type: `task.${request.kind}.cancelled`,
      message: `${task.kind} task cancelled: ${reason}`,
      actor: request.actor,
      userId: request.userId,
      hostId: request.hostId,
      taskId: task.id,
      data: { code: 'cancelled' },
      task: taskView(row),
    });
  }

  private notify(row: TaskRow, type: 'task.queued' | 'task.progressed'): void {
    this.bus.notify({ type, task: taskView(row) });
  }
}
