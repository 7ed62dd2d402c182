import { createHash, timingSafeEqual } from 'node:crypto';
import type { Actor, BootstrapHandoff, BootstrapSessionAccepted, BootstrapTask } from '@ccp/api';
import type { EventBus } from '../../events/event-bus.js';
import { isoOut } from '../../shared/clock.js';
import type { AccessTicketsRepository } from '../../store/access-tickets-repository.js';
import type { HostsRepository, HostWithOwner } from '../../store/hosts-repository.js';
import type { TaskRow, TasksRepository } from '../../store/tasks-repository.js';
import type { UserRow, UsersRepository } from '../../store/users-repository.js';
import { type Access, principalOf } from '../access/access.js';
import type { AccessTickets } from '../access/access-tickets.js';
import { isExpired } from '../access/account-expiry.js';
import { DomainError, errors } from '../errors.js';
import type { HostLifecycle } from '../hosts/host-lifecycle.js';
import type { AccessSettings } from '../hosts/host-view.js';

/** A succeeded bootstrap task can be handed off this long after it finished. */
const HANDOFF_WINDOW_MS = 10 * 60_000;

const actorOf = (user: UserRow): Actor => ({ kind: user.role, id: user.id, username: user.username });

/**
 * The bootstrap flow for clients with nothing but a username and password: a session queues a `bootstrap`
 * task that starts the user's host (or succeeds at once), the client follows it, and the handoff gives a
 * one-time SSH ticket for the proxy. Only `bootstrap` tasks are visible here; their IDs are random UUIDs known
 * to the session's creator (and admins), and each hands off once.
 */
export class BootstrapService {
  constructor(
    private readonly users: UsersRepository,
    private readonly hosts: HostsRepository,
    private readonly tasks: TasksRepository,
    private readonly gate: Access,
    private readonly lifecycle: HostLifecycle,
    private readonly tickets: AccessTickets,
    private readonly bus: EventBus,
    private readonly access: AccessSettings,
    private readonly handoffs: AccessTicketsRepository,
    /** The secret of a session's handoff, derived from its task ID with the gateway's key (nothing stored). */
    private readonly handoffSecretOf: (taskId: string) => string,
  ) {}

  async createSession(
    input: { username: string; password: string; host?: string | null },
    clientAddress: string,
  ): Promise<BootstrapSessionAccepted> {
    const user = await this.gate.verify(
      { kind: 'password', username: input.username, password: input.password },
      'bootstrap',
      clientAddress,
    );
    const host = await this.chooseHost(user, input.host ?? null);
    const grant = await this.gate.requireHost(principalOf(user), host.id, 'operate');
    const accepted = await this.lifecycle.start(grant, 'bootstrap');
    await this.bus.emit({
      type: 'bootstrap.session.created',
      message: `${user.username} began a bootstrap session for host ${host.short_id}`,
      actor: actorOf(user),
      userId: user.id,
      hostId: host.id,
      taskId: accepted.task_id,
      data: { short_id: host.short_id, client_address: clientAddress },
    });
    return {
      task_id: accepted.task_id,
      status_url: `/v1/bootstrap/tasks/${accepted.task_id}`,
      handoff_secret: this.handoffSecretOf(accepted.task_id),
    };
  }

  async taskStatus(taskId: string): Promise<BootstrapTask> {
    const task = await this.bootstrapTask(taskId);
    return {
      task_id: task.id,
      status: task.status,
      stage: task.stage,
      message: task.message,
      progress: task.progress,
      error: task.error_code ? { code: task.error_code, message: task.error_message ?? '' } : null,
    };
  }

  async handoff(
    taskId: string,
    secret: string | undefined,
    clientAddress: string,
  ): Promise<BootstrapHandoff> {
    const task = await this.bootstrapTask(taskId);
    // Task IDs are seen by administrators (and in the event log): the ticket goes to the session's creator only.
    const expected = Buffer.from(this.handoffSecretOf(task.id));
    const given = Buffer.from(secret ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected))
      throw new DomainError(
        'forbidden',
        'handoff_secret_mismatch',
        'Only the client that began this bootstrap session can take its handoff: send the handoff_secret it was given as the X-Bootstrap-Secret header',
      );
    if (task.status === 'pending' || task.status === 'running')
      throw errors.conflict('not_ready', `The host is still starting (${task.stage})`, {
        progress: task.progress,
      });
    if (task.status === 'failed')
      throw errors.conflict('task_failed', task.error_message ?? 'Starting the host failed', {
        task_error: { code: task.error_code ?? 'failed', message: task.error_message ?? '' },
      });
    const finishedAt = task.finished_at ? Date.parse(task.finished_at) : 0;
    const used = () =>
      errors.conflict(
        'handoff_used',
        'This bootstrap session was already handed off or is too old; start a new one',
      );
    if (Date.now() - finishedAt > HANDOFF_WINDOW_MS) throw used();
    const host = task.host_id ? await this.hosts.findById(task.host_id) : undefined;
    const user = task.user_id ? await this.users.findById(task.user_id) : undefined;
    if (!host || !user) throw errors.notFound('Bootstrap task');
    if (user.status === 'disabled') throw errors.accountDisabled();
    if (isExpired(user)) throw errors.accountExpired();
    if (host.status !== 'running')
      throw errors.conflict(
        'host_not_running',
        `Host ${host.short_id} is ${host.status} again; start a new session`,
      );

    // Once in all: the mark lives in the database, so another gateway taking the same poll refuses it too.
    const first = await this.handoffs.insertOnce({
      digest: createHash('sha256').update(`bootstrap handoff ${task.id}`).digest('base64url'),
      kind: 'handoff',
      granted: '{}',
      expires_at: new Date(finishedAt + HANDOFF_WINDOW_MS).toISOString(),
    });
    if (!first) throw used();
    const { ticket, expiresAt } = await this.tickets.issue({ userId: user.id, hostId: host.id });
    await this.bus.emit({
      type: 'bootstrap.handoff',
      message: `${user.username} received a one-time SSH ticket for host ${host.short_id}`,
      actor: actorOf(user),
      userId: user.id,
      hostId: host.id,
      taskId: task.id,
      data: { short_id: host.short_id, client_address: clientAddress, expires_at: expiresAt.toISOString() },
    });
    return {
      host: this.access.publicHost,
      port: this.access.sshProxyPort,
      user: `${user.username}+${host.short_id}`,
      password: ticket,
      expires_at: isoOut(expiresAt.toISOString()),
    };
  }

  private async chooseHost(user: UserRow, shortId: string | null): Promise<HostWithOwner> {
    const owned = await this.hosts.list({ userId: user.id });
    if (shortId) {
      const host = owned.find((h) => h.short_id === shortId);
      if (!host) throw errors.noHost(`${user.username} has no host ${shortId}`);
      return host;
    }
    if (owned.length === 0)
      throw errors.noHost(`${user.username} has no host; ask an administrator to create one`);
    if (owned.length > 1) {
      const shortIds = owned.map((h) => h.short_id);
      throw errors.conflict(
        'host_ambiguous',
        `${user.username} has several hosts (${shortIds.join(', ')}); choose one`,
        { hosts: shortIds },
      );
    }
    return owned[0]!;
  }

  private async bootstrapTask(taskId: string): Promise<TaskRow> {
    const task = await this.tasks.findById(taskId);
    if (task?.kind !== 'bootstrap') throw errors.notFound('Bootstrap task');
    return task;
  }
}
