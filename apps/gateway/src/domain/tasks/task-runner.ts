import { randomUUID } from 'node:crypto';
import type { Actor, Task, TaskKind } from '@ccp/api';
import type { Logger } from 'pino';
import type { EventBus } from '../../events/event-bus.js';
import { systemActor } from '../../events/event-bus.js';
import { isoOut, nowIso } from '../../shared/clock.js';
import type { ClusterBus } from '../../shared/cluster-messages.js';
import { violates } from '../../store/errors.js';
import type { TaskRow, TasksRepository } from '../../store/tasks-repository.js';
import { DomainError, errors } from '../errors.js';

/** A task as the node that runs it sees it: what is known from its row alone. */
export interface QueuedTask {
  id: string;
  kind: TaskKind;
  hostId: string | null;
  userId: string | null;
  actor: Actor;
  options: TaskOptions;
}

/** What a task needs beyond its kind and host (an image build's `rebuild`). */
export type TaskOptions = Record<string, boolean | string>;

/** The work of one kind of task, registered by the service that owns it; any node can run any queued task. */
export interface TaskHandler {
  /** `signal` aborts when the task is cancelled (only for `cancellable` kinds). Answers the task's message. */
  work(
    task: QueuedTask,
    progress: (percent: number, stage: string) => Promise<void>,
    signal: AbortSignal,
  ): Promise<string>;
  /** A stop or delete of the host may end it (a start waiting on an upstream that never answers). */
  cancellable?: boolean;
  /**
   * Called when the task failed, after the row is written (the host's status follows it). Not called for a
   * cancelled task: whoever cancelled it takes the host over.
   */
  onFailure?(task: QueuedTask, code: string, message: string): Promise<void>;
}

export interface TaskRequest {
  kind: TaskKind;
  /** The host worked on; null for work on no host (an image build), which holds one lock of its own. */
  hostId: string | null;
  userId: string | null;
  actor: Actor;
  /** The node that runs it: the host's node; this gateway's own for work on no host. */
  node: string;
  options?: TaskOptions;
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
    node: row.node,
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

/**
 * Writes a task's row through `insert`, around a check that must hold while it does (a quota's: see
 * ResourcesService.admitStart); `insert` takes the repository to write with inside that check's lock.
 */
export type TaskAdmission = (insert: (tasks?: TasksRepository) => Promise<TaskRow>) => Promise<TaskRow>;

/** Who asked for a stop: an admin or a user by name, or the gateway itself (an account disabled or expired). */
export type StopRequester = { kind: 'admin' | 'user'; username: string } | { kind: 'system' };

/** The lock of work on no host (image builds): one at a time, beside any host's task. */
const NO_HOST = 'no-host';
/** How often a node looks at the queue without being told (a lost message, a bus that was down). */
const POLL_MS = 2000;

const requester = (actor: Actor) =>
  actor.kind === 'system' ? 'system' : `${actor.kind}:${actor.username ?? actor.id}`;

/** The requester and options a task was queued with (a row from before nodes has neither). */
function requestOf(row: TaskRow): { actor: Actor; options: TaskOptions } {
  if (!row.request) return { actor: systemActor, options: {} };
  const parsed = JSON.parse(row.request) as { actor: Actor; options?: TaskOptions };
  return { actor: parsed.actor, options: parsed.options ?? {} };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Persisted tasks: at most one unfinished per host (the database holds that for every gateway), run by the
 * host's node. A task for this node runs at once; one for another node waits in the table until that node takes
 * it (`FOR UPDATE SKIP LOCKED` on PostgreSQL), woken by `task.queued` on the cluster bus and by a poll. Progress
 * is streamed and every outcome logged.
 */
export class TaskRunner {
  private readonly running = new Map<string, RunningTask>();
  private readonly handlers = new Map<TaskKind, TaskHandler>();
  private poll: NodeJS.Timeout | null = null;
  private draining: Promise<void> | null = null;

  constructor(
    private readonly tasks: TasksRepository,
    private readonly bus: EventBus,
    private readonly log: Logger,
    private readonly cluster: ClusterBus,
    /** This gateway's node. */
    readonly node: string,
  ) {}

  handle(kind: TaskKind, handler: TaskHandler): void {
    this.handlers.set(kind, handler);
  }

  /** Takes tasks other gateways queue for this node, from now on. */
  start(): void {
    this.cluster.subscribe('task.queued', ({ node }) => {
      if (node === this.node) this.drain();
    });
    this.cluster.subscribe('task.cancel_requested', ({ taskId }) => void this.checkCancels([taskId]));
    this.cluster.onMissed(() => {
      this.drain();
      void this.checkCancels();
    });
    this.poll = setInterval(() => {
      this.drain();
      void this.checkCancels();
    }, POLL_MS);
    this.poll.unref();
    this.drain();
  }

  stop(): void {
    if (this.poll) clearInterval(this.poll);
    this.poll = null;
  }

  async submit(request: TaskRequest, admission?: TaskAdmission): Promise<TaskRow> {
    const { hostId } = request;
    const handler = this.handlerOf(request.kind);
    const local = request.node === this.node;
    const lock = hostId ?? NO_HOST;
    const busyHere = this.running.get(lock)?.id;
    if (busyHere) throw this.busy(hostId, busyHere);
    const id = randomUUID();
    const row = {
      id,
      kind: request.kind,
      host_id: hostId,
      user_id: request.userId,
      status: 'pending' as const,
      progress: 0,
      stage: 'queued',
      message: '',
      error_code: null,
      error_message: null,
      requested_by: requester(request.actor),
      created_at: nowIso(),
      started_at: null,
      finished_at: null,
      node: request.node,
      // A task for this node is taken at once; another node takes its own from the queue.
      claimed_at: local ? nowIso() : null,
      cancel_reason: null,
      request: JSON.stringify({ actor: request.actor, options: request.options ?? {} }),
    };
    if (!local) {
      const inserted = await this.insert(row, hostId, admission);
      this.notify(inserted, 'task.queued');
      await this.cluster.publish('task.queued', { node: request.node });
      return inserted;
    }
    // Claim the lock before the first await below, so a concurrent request here sees it busy.
    const claim = this.claim(lock, id, handler);
    try {
      const inserted = await this.insert(row, hostId, admission);
      this.notify(inserted, 'task.queued');
      setImmediate(() => this.run(inserted, handler, claim));
      return inserted;
    } catch (error) {
      this.running.delete(lock);
      claim.release();
      throw error;
    }
  }

  /** Resolves when no task of this gateway is running (shutdown, tests). */
  async idle(): Promise<void> {
    while (this.running.size > 0 || this.draining) {
      await this.draining;
      await Promise.all([...this.running.values()].map((task) => task.done));
    }
  }

  /** Waits (bounded) for the unfinished task of one host, run here or by another node, to end. */
  async settled(hostId: string): Promise<void> {
    const here = this.running.get(hostId);
    if (here) return here.done;
    const active = await this.tasks.findActiveForHost(hostId);
    if (active) await this.finished(active.id);
  }

  /** Waits (bounded) until a task, run by whichever node, has ended; answers its last row. */
  async finished(taskId: string, timeoutMs = 120_000): Promise<TaskRow | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const row = await this.tasks.findById(taskId);
      if (!row || (row.status !== 'pending' && row.status !== 'running') || Date.now() > deadline) return row;
      await sleep(200);
    }
  }

  /**
   * Cancels the host's task if its kind may be cancelled, wherever it runs, and waits until it has unwound and
   * its row says `failed` with `cancelled` (the message: `why`, and who asked). Another kind of task is left
   * running.
   */
  async cancel(hostId: string, why: string, actor: Actor): Promise<void> {
    const reason = `${why} (${requester(actor)})`;
    if (this.running.has(hostId)) {
      for (let task = this.running.get(hostId); task?.cancel; task = this.running.get(hostId)) {
        task.cancel.abort(reason);
        await task.done;
      }
      return;
    }
    const active = await this.tasks.findActiveForHost(hostId);
    if (!active || !this.handlers.get(active.kind as TaskKind)?.cancellable) return;
    const unclaimed = await this.tasks.failUnclaimed(active.id, this.cancelledPatch(reason));
    if (unclaimed) {
      await this.emitCancelled(unclaimed, reason);
      return;
    }
    await this.tasks.requestCancel(active.id, reason);
    await this.cluster.publish('task.cancel_requested', { taskId: active.id });
    await this.finished(active.id, 60_000);
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

  /** Whether a task, run by any node, is unfinished for the host. */
  async isBusy(hostId: string): Promise<boolean> {
    return this.running.has(hostId) || (await this.tasks.findActiveForHost(hostId)) !== undefined;
  }

  /** A task this node took and left unfinished (a crash) is failed as interrupted at its next start. */
  async failInterrupted(): Promise<TaskRow[]> {
    const leftovers = await this.tasks.listUnfinishedClaimed(this.node);
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

  /** Fails the unfinished tasks of a node removed for good (nothing will run them); answers how many. */
  async failOfRemovedNode(node: string, actor: Actor): Promise<number> {
    const message = `Node ${node} was removed before it finished this task`;
    const failed = await this.tasks.failUnfinishedOfNode(node, {
      status: 'failed',
      error_code: 'node_removed',
      error_message: message,
      finished_at: nowIso(),
    });
    for (const row of failed)
      await this.bus.emit({
        type: `task.${row.kind as TaskKind}.failed`,
        level: 'warn',
        message: `${row.kind} task failed: ${message}`,
        actor,
        userId: row.user_id,
        hostId: row.host_id,
        taskId: row.id,
        data: { code: 'node_removed' },
        task: taskView(row),
      });
    return failed.length;
  }

  private handlerOf(kind: TaskKind): TaskHandler {
    const handler = this.handlers.get(kind);
    if (!handler) throw new Error(`no handler for ${kind} tasks`);
    return handler;
  }

  private busy(hostId: string | null, taskId: string): DomainError {
    if (!hostId)
      return errors.conflict('images_busy', 'An image build is already running', { task_id: taskId });
    return errors.conflict('host_busy', 'A task is already running for this host', { task_id: taskId });
  }

  private async insert(
    row: Parameters<TasksRepository['insert']>[0],
    hostId: string | null,
    admission: TaskAdmission = (insert) => insert(),
  ): Promise<TaskRow> {
    try {
      return await admission((tasks = this.tasks) => tasks.insert(row));
    } catch (error) {
      if (!hostId || !violates(error, 'unique')) throw error;
      // Another gateway's task for the host, unfinished.
      const other = await this.tasks.findActiveForHost(hostId);
      throw this.busy(hostId, other?.id ?? '');
    }
  }

  private claim(lock: string, id: string, handler: TaskHandler): RunningTask & { release: () => void } {
    let release!: () => void;
    const done = new Promise<void>((resolve) => {
      release = resolve;
    });
    const task = { id, done, ...(handler.cancellable ? { cancel: new AbortController() } : {}) };
    this.running.set(lock, task);
    return { ...task, release };
  }

  private run(row: TaskRow, handler: TaskHandler, claim: RunningTask & { release: () => void }): void {
    const lock = row.host_id ?? NO_HOST;
    this.execute(row, handler, claim.cancel?.signal ?? new AbortController().signal)
      .catch((error: unknown) => this.log.error({ err: error, taskId: row.id }, 'task bookkeeping failed'))
      .finally(() => {
        this.running.delete(lock);
        claim.release();
        // Another task for a host on this node may have been queued meanwhile.
        this.drain();
      });
  }

  /** Takes this node's queued tasks; one pass at a time. */
  private drain(): void {
    if (this.draining || this.poll === null) return;
    this.draining = this.takeQueued()
      .catch((error: unknown) => this.log.warn({ err: error }, 'taking queued tasks failed'))
      .finally(() => {
        this.draining = null;
      });
  }

  private async takeQueued(): Promise<void> {
    for (;;) {
      const taken = await this.tasks.claimQueued(this.node, nowIso(), 10);
      if (taken.length === 0) return;
      for (const row of taken) {
        const handler = this.handlers.get(row.kind as TaskKind);
        const lock = row.host_id ?? NO_HOST;
        if (!handler) {
          await this.tasks.update(row.id, {
            status: 'failed',
            error_code: 'internal',
            error_message: `this gateway has no handler for ${row.kind} tasks (an older version?)`,
            finished_at: nowIso(),
          });
          continue;
        }
        // The host's previous task here has its outcome written and is finishing its bookkeeping.
        await this.running.get(lock)?.done;
        this.run(row, handler, this.claim(lock, row.id, handler));
      }
    }
  }

  /** Aborts the running tasks (all, or those named) that another gateway asked to cancel. */
  private async checkCancels(ids?: string[]): Promise<void> {
    const cancellable = [...this.running.values()].filter(
      (task) => task.cancel && !task.cancel.signal.aborted && (!ids || ids.includes(task.id)),
    );
    if (cancellable.length === 0) return;
    try {
      const asked = await this.tasks.cancelRequests(cancellable.map((task) => task.id));
      for (const task of cancellable) {
        const reason = asked.get(task.id);
        if (reason !== undefined) task.cancel?.abort(reason);
      }
    } catch (error) {
      this.log.warn({ err: error }, 'reading cancel requests failed');
    }
  }

  private async execute(task: TaskRow, handler: TaskHandler, signal: AbortSignal): Promise<void> {
    const queued: QueuedTask = {
      id: task.id,
      kind: task.kind as TaskKind,
      hostId: task.host_id,
      userId: task.user_id,
      ...requestOf(task),
    };
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
    const event = { actor: queued.actor, userId: queued.userId, hostId: queued.hostId, taskId: task.id };
    try {
      const message = await handler.work(queued, progress, signal);
      row = await this.tasks.update(task.id, {
        status: 'succeeded',
        progress: 100,
        stage: 'done',
        message,
        finished_at: nowIso(),
      });
      await this.bus.emit({
        type: `task.${queued.kind}.succeeded`,
        message: `${task.kind} task succeeded on node ${this.node}: ${message}`,
        ...event,
        task: taskView(row),
      });
    } catch (error) {
      if (signal.aborted) {
        row = await this.tasks.update(task.id, this.cancelledPatch(String(signal.reason)));
        await this.emitCancelled(row, String(signal.reason));
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
        type: `task.${queued.kind}.failed`,
        level: 'error',
        message: `${task.kind} task failed on node ${this.node} (${code}): ${message}`,
        ...event,
        data: { code },
        task: taskView(row),
      });
      await handler.onFailure?.(queued, code, message);
    }
  }

  /** A cancelled task fails with `cancelled`: the contract knows no other end for a task than success and failure. */
  private cancelledPatch(reason: string) {
    return {
      status: 'failed' as const,
      error_code: 'cancelled',
      error_message: reason,
      finished_at: nowIso(),
    };
  }

  private async emitCancelled(row: TaskRow, reason: string): Promise<void> {
    await this.bus.emit({
      type: `task.${row.kind as TaskKind}.cancelled`,
      message: `${row.kind} task cancelled: ${reason}`,
      actor: requestOf(row).actor,
      userId: row.user_id,
      hostId: row.host_id,
      taskId: row.id,
      data: { code: 'cancelled' },
      task: taskView(row),
    });
  }

  private notify(row: TaskRow, type: 'task.queued' | 'task.progressed'): void {
    this.bus.notify({ type, task: taskView(row) });
  }
}
