// What a container holds in memory, process by process and as its cgroup counts it. Three per-process
// figures, because processes share pages: RSS counts every page a process maps (a shared library or binary
// counts in full in each process, and once more in each container), PSS splits each shared page between the
// processes mapping it (across containers too, so it falls as more hosts run), USS is what the process holds
// alone. The cgroup's anonymous memory plus its kernel memory is what one more container of the kind costs
// the machine: the binaries' page cache is shared by every container of the image and charged to one of them.
import { readFile } from 'node:fs/promises';
import { memoryCgroup } from '../lib/memory-cgroup.js';

export interface ProcessMemory {
  pid: number;
  ppid: number;
  command: string;
  rssKiB: number;
  pssKiB: number;
  ussKiB: number;
  anonKiB: number;
}

export interface CgroupMemory {
  /** What `docker stats` shows: usage without inactive page cache. */
  usedKiB: number;
  /** Anonymous memory plus the kernel's (page tables, sockets, stacks): usage without any page cache. */
  anonKernelKiB: number;
  /** Page cache charged to this cgroup (first toucher pays; shared with other containers of the image). */
  fileKiB: number;
}

export interface ContainerProcesses {
  processes: ProcessMemory[];
  cgroup: CgroupMemory;
}

const statField = (text: string, name: string) =>
  Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);

/** One process's figures from smaps_rollup (null once it has gone). */
async function processMemory(pid: number): Promise<ProcessMemory | null> {
  try {
    const [rollup, cmdline, stat] = await Promise.all([
      readFile(`/proc/${pid}/smaps_rollup`, 'utf8'),
      readFile(`/proc/${pid}/cmdline`, 'utf8'),
      readFile(`/proc/${pid}/stat`, 'utf8'),
    ]);
    const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(rollup)?.[1] ?? 0);
    // "pid (comm) state ppid …", comm possibly holding spaces.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    const argv = cmdline.split('\0').filter(Boolean);
    const command = [argv[0]?.split('/').at(-1) ?? '?', ...argv.slice(1)].join(' ');
    return {
      pid,
      ppid,
      command,
      rssKiB: kib('Rss'),
      pssKiB: kib('Pss'),
      ussKiB: kib('Private_Clean') + kib('Private_Dirty'),
      anonKiB: kib('Anonymous'),
    };
  } catch {
    return null;
  }
}

/** Every process of the running container whose init process is `pid`, and its cgroup's figures. */
export async function containerProcesses(pid: number): Promise<ContainerProcesses> {
  const cgroup = await memoryCgroup(pid);
  const [usage, stat, procs] = await Promise.all([
    readFile(`${cgroup.dir}/${cgroup.usage}`, 'utf8'),
    readFile(`${cgroup.dir}/memory.stat`, 'utf8'),
    readFile(`${cgroup.dir}/cgroup.procs`, 'utf8'),
  ]);
  const usageKiB = Number(usage) / 1024;
  const fileKiB = statField(stat, cgroup.file) / 1024;
  const processes = (
    await Promise.all(
      procs
        .split('\n')
        .filter(Boolean)
        .map((proc) => processMemory(Number(proc))),
    )
  ).filter((p): p is ProcessMemory => p !== null);
  return {
    processes: processes.sort((a, b) => a.pid - b.pid),
    cgroup: {
      usedKiB: usageKiB - statField(stat, cgroup.inactive) / 1024,
      anonKernelKiB: usageKiB - fileKiB,
      fileKiB,
    },
  };
}

export const sumOf = (processes: ProcessMemory[], field: 'rssKiB' | 'pssKiB' | 'ussKiB' | 'anonKiB') =>
  processes.reduce((total, p) => total + p[field], 0);
