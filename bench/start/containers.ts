// Container helpers of the start bench: when sshd greets, what a container holds in memory, and removing
// everything one bench run labelled.
import { readFile } from 'node:fs/promises';
import type Docker from 'dockerode';
import { sshBanner } from '../../apps/gateway/dist/runtime/readiness.js';
import { rssMiB } from '../lib/children.js';

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls every 10 ms until sshd at `host:port` greets; fails after `timeoutMs`. */
export async function waitForSshBanner(host: string, port: number, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (await sshBanner(host, port)) return;
    await delay(10);
  }
  throw new Error(`no SSH banner from ${host}:${port} within ${timeoutMs} ms`);
}

export interface ContainerMemory {
  /** What `docker stats` shows: the cgroup's usage without inactive page cache, MiB. */
  usedMiB: number;
  /** The resident set sizes of the container's processes, added up (shared pages count once each), MiB. */
  rssMiB: number;
  /** RSS of the containerd shim that supervises the container from outside its cgroup, MiB. */
  shimRssMiB: number;
}

/** The memory cgroup directory of a process, cgroup v1 or v2, and the names of the files to read there. */
async function memoryCgroup(pid: number) {
  const lines = (await readFile(`/proc/${pid}/cgroup`, 'utf8')).split('\n');
  const v1 = lines.map((line) => /^\d+:(?:[^:]*,)?memory(?:,[^:]*)?:(.*)$/.exec(line)?.[1]).find(Boolean);
  if (v1 !== undefined)
    return {
      dir: `/sys/fs/cgroup/memory${v1}`,
      usage: 'memory.usage_in_bytes',
      inactive: 'total_inactive_file',
    };
  const v2 = lines.map((line) => /^0::(.*)$/.exec(line)?.[1]).find(Boolean);
  if (v2 === undefined) throw new Error(`no memory cgroup for process ${pid}`);
  return { dir: `/sys/fs/cgroup${v2}`, usage: 'memory.current', inactive: 'inactive_file' };
}

/** Memory of the running container whose init process is `pid`, read from its cgroup. */
export async function containerMemory(pid: number): Promise<ContainerMemory> {
  const cgroup = await memoryCgroup(pid);
  const usage = Number(await readFile(`${cgroup.dir}/${cgroup.usage}`, 'utf8'));
  const memoryStat = await readFile(`${cgroup.dir}/memory.stat`, 'utf8');
  const inactive = Number(new RegExp(`^${cgroup.inactive} (\\d+)$`, 'm').exec(memoryStat)?.[1] ?? 0);
  const procs = (await readFile(`${cgroup.dir}/cgroup.procs`, 'utf8')).split('\n').filter(Boolean);
  const rss = procs.reduce((sum, proc) => sum + (rssMiB(Number(proc)) ?? 0), 0);
  // The init process's parent; "pid (comm) state ppid …", comm possibly holding spaces.
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const shim = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  return { usedMiB: (usage - inactive) / 2 ** 20, rssMiB: rss, shimRssMiB: rssMiB(shim) ?? 0 };
}

/** The host's MemAvailable, MiB. */
export async function memAvailableMiB(): Promise<number> {
  const meminfo = await readFile('/proc/meminfo', 'utf8');
  return Number(/^MemAvailable:\s+(\d+) kB$/m.exec(meminfo)?.[1]) / 1024;
}

/**
 * Force-removes every container, then every volume, whose `label` value starts with `prefix`. Docker filters
 * labels by exact value only, so the prefix is matched here.
 */
export async function removeLabelled(docker: Docker, label: string, prefix: string): Promise<number> {
  const ours = (labels: Record<string, string> | null | undefined) => labels?.[label]?.startsWith(prefix);
  const filters = { label: [label] };
  const containers = (await docker.listContainers({ all: true, filters })).filter((c) => ours(c.Labels));
  await Promise.all(
    containers.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true, v: true })
        .catch(() => undefined),
    ),
  );
  const { Volumes } = await docker.listVolumes({ filters });
  const volumes = (Volumes ?? []).filter((v) => ours(v.Labels));
  await Promise.all(
    volumes.map((v) =>
      docker
        .getVolume(v.Name)
        .remove()
        .catch(() => undefined),
    ),
  );
  return containers.length + volumes.length;
}
