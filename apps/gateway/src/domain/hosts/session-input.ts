import type { HostsRepository } from '../../store/hosts-repository.js';

/**
 * Where people's sessions come in at this gateway (the SSH proxy, the browser terminal, the desktop proxy): the
 * hosts that got a person's input through one since the previous call (keys, a mounted folder's or a forwarded
 * port's data, pointer and clipboard). Keepalives and a viewer's own update requests are not input.
 */
export interface SessionInputSource {
  takeHostsWithInput(): Iterable<string>;
}

/** A proxy's live sessions as a SessionInputSource: each session's input counter against what was last taken. */
export class SessionInputWatch<Session extends object> implements SessionInputSource {
  private readonly taken = new WeakMap<Session, number>();

  constructor(
    private readonly sessions: () => Iterable<Session>,
    private readonly hostIdOf: (session: Session) => string,
    /** A counter of the session's input that only grows (bytes or input events). */
    private readonly inputOf: (session: Session) => number,
  ) {}

  takeHostsWithInput(): string[] {
    const hostIds: string[] = [];
    for (const session of this.sessions()) {
      const input = this.inputOf(session);
      if (input <= (this.taken.get(session) ?? 0)) continue;
      this.taken.set(session, input);
      hostIds.push(this.hostIdOf(session));
    }
    return hostIds;
  }
}

/**
 * Records session input as the hosts' last activity (signal `session`) in the database, where the lifecycle rounds
 * of the host's own node read it: a session may come in at any gateway. A session open but unused is no activity,
 * so a terminal left attached overnight neither keeps its host running nor hides the warning of its idle stop.
 */
export class SessionInputRecorder {
  constructor(
    private readonly sources: SessionInputSource[],
    private readonly hosts: Pick<HostsRepository, 'recordSessionInput'>,
    private readonly now: () => number = Date.now,
  ) {}

  async record(): Promise<void> {
    const hostIds = new Set<string>();
    for (const source of this.sources) for (const hostId of source.takeHostsWithInput()) hostIds.add(hostId);
    await this.hosts.recordSessionInput([...hostIds], new Date(this.now()).toISOString());
  }
}
