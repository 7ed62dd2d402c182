/**
 * One operation at a time per host: tasks, switches and the restart watcher all go through here, in the order
 * they asked. A failed operation does not stop the next.
 */
export class HostLock {
  private readonly queues = new Map<string, Promise<unknown>>();

  run<T>(hostId: string, work: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(hostId) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(work);
    const tail = next.catch(() => undefined);
    this.queues.set(hostId, tail);
    void tail.then(() => {
      if (this.queues.get(hostId) === tail) this.queues.delete(hostId);
    });
    return next;
  }
}
