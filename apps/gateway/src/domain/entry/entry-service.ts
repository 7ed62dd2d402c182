import type { Actor, EntryCheck, EntryReady, EntryStarting, HostStatus } from '@ccp/api';
import type { EventBus } from '../../events/event-bus.js';
import type { HostsRepository, HostWithOwner } from '../../store/hosts-repository.js';
import type { TasksRepository } from '../../store/tasks-repository.js';
import type { UserRow } from '../../store/users-repository.js';
import { type Access, principalOf } from '../access/access.js';
import type { SecretBox } from '../access/secret-box.js';
import { SHORT_ID_PATTERN } from '../access/secrets.js';
import { errors } from '../errors.js';
import type { HostLifecycle } from '../hosts/host-lifecycle.js';
import type { AccessSettings } from '../hosts/host-view.js';

export type EntryAnswer = { status: 200; body: EntryReady } | { status: 202; body: EntryStarting };

const actorOf = (user: UserRow): Actor => ({ kind: user.role, id: user.id, username: user.username });

/**
 * The entry short link: a host's owner proves their login password and gets the SSH parameters of the host,
 * or, when it is not running, a start is queued and they are told to ask again.
 */
export class EntryService {
  constructor(
    private readonly hosts: HostsRepository,
    private readonly tasks: TasksRepository,
    private readonly gate: Access,
    private readonly lifecycle: HostLifecycle,
    private readonly box: SecretBox,
    private readonly bus: EventBus,
    private readonly access: AccessSettings,
  ) {}

  /** The host behind a short link; unknown IDs are 404 (and never reach a script template). */
  async hostFor(shortId: string): Promise<HostWithOwner> {
    const host = SHORT_ID_PATTERN.test(shortId) ? await this.hosts.findByShortId(shortId) : undefined;
    if (!host) throw errors.notFound('Host');
    return host;
  }

  /**
   * What a client checks before it saves its settings (`ccp init`, `ccp doctor`): that the short ID names a
   * host and the password is its owner's, and the host's state, without starting anything. Failures count
   * against the caller like an entry auth's.
   */
  async check(shortId: string, password: string, clientAddress: string): Promise<EntryCheck> {
    const host = await this.gate.hostByShortId(shortId, clientAddress);
    const user = await this.gate.verify(
      { kind: 'password', username: host.username, password },
      'entry',
      clientAddress,
    );
    return { short_id: host.short_id, username: user.username, host_status: host.status as HostStatus };
  }

  /** `awaitedTaskId`: the start the caller is waiting for, so a failed start ends the wait instead of
   * queueing the next one. */
  async authenticate(
    shortId: string,
    password: string,
    clientAddress: string,
    awaitedTaskId: string | null = null,
  ): Promise<EntryAnswer> {
    const host = await this.gate.hostByShortId(shortId, clientAddress);
    const user = await this.gate.verify(
      { kind: 'password', username: host.username, password },
      'entry',
      clientAddress,
    );

    const awaited = awaitedTaskId ? await this.tasks.findById(awaitedTaskId) : undefined;
    if (awaited?.host_id === host.id && awaited.status === 'failed') {
      throw errors.conflict('task_failed', awaited.error_message ?? 'Starting the host failed', {
        task_error: { code: awaited.error_code ?? 'failed', message: awaited.error_message ?? '' },
      });
    }
    const active = await this.tasks.findActiveForHost(host.id);
    if (active?.kind === 'stop') {
      throw errors.conflict('host_busy', 'The host is stopping; ask again in a few seconds', {
        task_id: active.id,
      });
    }
    if (active) return this.starting(active.id, active.stage, active.progress);
    // Read again: a start may have ended while the password was checked (scrypt takes a while), and the status
    // read before it would queue a second start.
    const current = await this.gate.hostByShortId(shortId, clientAddress);
    if (current.status === 'running') {
      await this.succeeded(user, host, clientAddress, 'ready');
      return {
        status: 200,
        body: {
          status: 'ready',
          ssh_user: `${user.username}+${host.short_id}`,
          ssh_pass: this.box.open(user.ssh_pass_sealed),
          ssh_host: this.access.publicHost,
          ssh_port: this.access.sshProxyPort,
        },
      };
    }
    const accepted = await this.lifecycle.start(
      await this.gate.requireHost(principalOf(user), host.id, 'operate'),
    );
    await this.succeeded(user, host, clientAddress, 'starting');
    return this.starting(accepted.task_id, 'queued', 0);
  }

  private starting(taskId: string, stage: string, progress: number): EntryAnswer {
    return { status: 202, body: { status: 'starting', task_id: taskId, stage, progress } };
  }

  /** Logged when the answer changes something for the user (not on every poll while the host starts). */
  private async succeeded(user: UserRow, host: HostWithOwner, clientAddress: string, outcome: string) {
    await this.bus.emit({
      type: 'auth.entry.succeeded',
      message:
        outcome === 'ready'
          ? `${user.username} opened host ${host.short_id} through its entry link`
          : `${user.username} started host ${host.short_id} through its entry link`,
      actor: actorOf(user),
      userId: user.id,
      hostId: host.id,
      data: { short_id: host.short_id, client_address: clientAddress, outcome },
    });
  }
}
