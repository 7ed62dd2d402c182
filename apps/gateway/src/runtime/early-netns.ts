import { closeSync, fstatSync, openSync, readFileSync } from 'node:fs';
import { hostNetnsInode, netnsInode } from './netns.js';
import { delay } from './readiness.js';

/**
 * Where Docker puts a container's processes, per cgroup layout (cgroupfs or systemd driver, cgroup v1 or v2).
 * A custom cgroup parent matches none: the namespace is then found only once the start returns.
 */
const CGROUP_PROCS = (id: string) => [
  `/sys/fs/cgroup/pids/docker/${id}/cgroup.procs`,
  `/sys/fs/cgroup/docker/${id}/cgroup.procs`,
  `/sys/fs/cgroup/pids/system.slice/docker-${id}.scope/cgroup.procs`,
  `/sys/fs/cgroup/system.slice/docker-${id}.scope/cgroup.procs`,
];

const POLL_MS = 5;

/** A network namespace held open by this process, named by a path other processes can enter. */
export class HeldNetns {
  private constructor(
    private readonly fd: number,
    /** The namespace's inode: its identity for as long as it is held. */
    readonly inode: number,
  ) {}

  /** Holds the namespace of `pid`; null when the process is gone. */
  static of(pid: number): HeldNetns | null {
    try {
      const fd = openSync(`/proc/${pid}/ns/net`, 'r');
      return new HeldNetns(fd, fstatSync(fd).ino);
    } catch {
      return null;
    }
  }

  /** For nsenter --net=: this process's descriptor, valid while held. */
  get path(): string {
    return `/proc/${process.pid}/fd/${this.fd}`;
  }

  /** Whether `pid` lives in this namespace. */
  holds(pid: number): boolean {
    try {
      return netnsInode(pid) === this.inode;
    } catch {
      return false;
    }
  }

  release(): void {
    closeSync(this.fd);
  }
}

/**
 * The network namespace of a container Docker is starting, as soon as one of its processes is in it: runc makes
 * the namespace about half-way through a workspace's `docker start`, so what waits for it can begin 40-50 ms
 * before the start returns (machine A). Polls until `done` resolves (the start returned); null when none was
 * seen by then. Whoever uses it checks it against the container's process once the start returned (`holds`): a
 * namespace seen early is trusted only as the container's own.
 */
export async function watchNetns(containerId: string, done: Promise<unknown>): Promise<HeldNetns | null> {
  let finished = false;
  const finish = () => {
    finished = true;
  };
  const ended = done.then(finish, finish);
  const paths = CGROUP_PROCS(containerId);
  while (!finished) {
    for (const path of paths) {
      let procs: string;
      try {
        procs = readFileSync(path, 'utf8');
      } catch {
        continue;
      }
      for (const pid of procs.split('\n').filter(Boolean).map(Number)) {
        const held = HeldNetns.of(pid);
        if (held && held.inode !== hostNetnsInode()) return held;
        held?.release();
      }
    }
    await Promise.race([delay(POLL_MS), ended]);
  }
  return null;
}
