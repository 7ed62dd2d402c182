// Container helpers of the start bench: when sshd greets, what a container holds in memory, and removing
// everything one bench run labelled.
import { readFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import type Docker from 'dockerode';
import {
  HOST_LABEL,
  hostOfContainer,
  OWNER_LABEL,
  POOL_LABEL,
  WORKSPACE_CAPABILITIES,
} from '../../apps/gateway/dist/runtime/container-specs.js';
import { sshBanner } from '../../apps/gateway/dist/runtime/readiness.js';
import { releaseUplink } from '../../apps/gateway/dist/runtime/uplink-guard.js';
import { rssMiB, startProcess } from '../lib/children.js';
import { memoryCgroup } from '../lib/memory-cgroup.js';

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

/** Runs the docker CLI (a tracked child) and fails with its stderr unless it exits 0. */
export async function dockerCli(args: string[]): Promise<void> {
  const child = startProcess(`docker ${args[0]}`, 'docker', args);
  const code = await child.exited;
  if (code !== 0) throw new Error(`docker ${args[0]} exited with ${code}: ${child.stderrTail()}`);
}

/** The workspace container as the runtime makes it, but on Docker's default bridge and with no gateway. */
export function rawRunArgs(raw: {
  name: string;
  hostId: string;
  image: string;
  authorizedKey: string;
  user: string;
  limits: { memoryMb: number; cpus: number; pids: number };
}): string[] {
  const { name, hostId, user, limits } = raw;
  const volume = (source: string, target: string) =>
    `type=volume,src=${source},dst=${target},volume-label=${HOST_LABEL}=${hostId}`;
  return [
    'run',
    '-d',
    '--init',
    `--name=${name}`,
    `--label=${HOST_LABEL}=${hostId}`,
    `--hostname=ccp-${hostId}`,
    '--cap-drop=ALL',
    ...WORKSPACE_CAPABILITIES.map((cap) => `--cap-add=${cap}`),
    '--sysctl=net.ipv6.conf.all.disable_ipv6=1',
    '--sysctl=net.ipv6.conf.default.disable_ipv6=1',
    `--memory=${limits.memoryMb}m`,
    `--memory-swap=${limits.memoryMb}m`,
    `--cpus=${limits.cpus}`,
    `--pids-limit=${limits.pids}`,
    '--shm-size=256m',
    `--env=WORKSPACE_USER=${user}`,
    '--env=WORKSPACE_UID=1000',
    `--env=WORKSPACE_AUTHORIZED_KEYS=${raw.authorizedKey}`,
    `--mount=${volume(`ccp-home-${hostId}`, `/home/${user}`)}`,
    `--mount=${volume(`ccp-hostkeys-${hostId}`, '/etc/ssh/hostkeys')}`,
    raw.image,
  ];
}

async function bridgeAddress(docker: Docker, name: string): Promise<string> {
  const info = await docker.getContainer(name).inspect();
  const address = info.NetworkSettings.Networks.bridge?.IPAddress;
  if (!address) throw new Error(`${name} has no address on Docker's bridge`);
  return address;
}

/** One timed `docker run` (or `docker start` of the stopped container) until its sshd greets, ms. */
export async function timedRaw(
  docker: Docker,
  args: string[],
  name: string,
  timeoutMs: number,
): Promise<number> {
  const began = performance.now();
  await dockerCli(args);
  await waitForSshBanner(await bridgeAddress(docker, name), 22, timeoutMs);
  return performance.now() - began;
}

export interface ContainerMemory {
  /** What `docker stats` shows: the cgroup's usage without inactive page cache, MiB. */
  usedMiB: number;
  /** The resident set sizes of the container's processes, added up (shared pages count once each), MiB. */
  rssMiB: number;
  /** RSS of the containerd shim that supervises the container from outside its cgroup, MiB. */
  shimRssMiB: number;
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
 * Force-removes every container, then every volume, whose `label` value starts with `prefix`, and releases
 * their hosts' uplink guards. Docker filters labels by exact value only, so the prefix is matched here.
 */
export async function removeLabelled(docker: Docker, label: string, prefix: string): Promise<number> {
  const ours = (labels: Record<string, string> | null | undefined) => labels?.[label]?.startsWith(prefix);
  const filters = { label: [label] };
  // An egress gateway a host took from the pool carries the pool's label and the host's name, not its label.
  const taken = (await docker.listContainers({ all: true, filters: { label: [POOL_LABEL] } })).filter((c) =>
    hostOfContainer(c.Labels, c.Names[0])?.startsWith(prefix),
  );
  const containers = [
    ...(await docker.listContainers({ all: true, filters })).filter((c) => ours(c.Labels)),
    ...taken,
  ];
  await Promise.all(
    containers.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true, v: true })
        .catch(() => undefined),
    ),
  );
  // The host-side guards of their egress gateways, which the runtime's remove() would have released: each one
  // left behind makes every later nft command on this machine slower.
  const hostIds = new Set(
    containers.map((c) => hostOfContainer(c.Labels, c.Names[0])).filter((id) => id !== null),
  );
  for (const hostId of hostIds) await releaseUplink(hostId).catch(() => undefined);
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

/** The process a bench runtime's instance id (`bench-<name>-<pid>-<random>`, its containers' owner label) names. */
const BENCH_OWNER = /^bench-[a-z-]+-(\d+)-[0-9a-f]+$/;

const isRunning = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/**
 * Removes the containers and volumes of bench gateways whose bench process has ended (killed outright, so its
 * clean-up never ran); another bench running beside this one keeps its own.
 */
export async function removeLeftoversOfEndedBenches(docker: Docker): Promise<number> {
  const filters = { label: [OWNER_LABEL] };
  const owners = new Set<string>();
  for (const c of await docker.listContainers({ all: true, filters })) owners.add(c.Labels[OWNER_LABEL]!);
  for (const v of (await docker.listVolumes({ filters })).Volumes ?? [])
    owners.add(v.Labels?.[OWNER_LABEL] ?? '');
  let removed = 0;
  for (const owner of owners) {
    const pid = BENCH_OWNER.exec(owner)?.[1];
    if (pid !== undefined && !isRunning(Number(pid)))
      removed += await removeLabelled(docker, OWNER_LABEL, owner);
  }
  return removed;
}
