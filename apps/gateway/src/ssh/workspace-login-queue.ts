import pLimit, { type LimitFunction } from 'p-limit';

/**
 * The gateway's logins to workspaces, at most `perHost` under way at once for each host. A workspace's sshd drops
 * connections past its MaxStartups (10 not yet logged in, OpenSSH's default), so a burst of sessions to one host
 * waits its turn here instead of being dropped there.
 */
export class WorkspaceLoginQueue {
  private readonly queues = new Map<string, { limit: LimitFunction; callers: number }>();

  constructor(private readonly perHost: number) {}

  run<T>(hostId: string, login: () => Promise<T>): Promise<T> {
    let queue = this.queues.get(hostId);
    if (!queue) {
      queue = { limit: pLimit(this.perHost), callers: 0 };
      this.queues.set(hostId, queue);
    }
    const entry = queue;
    entry.callers++;
    return entry.limit(login).finally(() => {
      if (--entry.callers === 0) this.queues.delete(hostId);
    });
  }
}
