import { readFile } from 'node:fs/promises';

/** A container's memory as its cgroup counts it (v1 or v2). */
export interface MemoryUse {
  /** Usage without the page cache the kernel could drop at once (what the engine's limit presses on). */
  workingSetBytes: number;
  limitBytes: number;
  /** Processes the kernel killed for memory in this cgroup since it was made. */
  oomKills: number;
}

/** Reads the memory cgroup of a container's main process; null when the process is gone. */
export async function readMemoryUse(pid: number): Promise<MemoryUse | null> {
  const lines = await readFile(`/proc/${pid}/cgroup`, 'utf8').then(
    (text) => text.split('\n'),
    () => null,
  );
  if (!lines) return null;
  const v1 = lines.map((line) => /^\d+:(?:[^:]*,)?memory(?:,[^:]*)?:(.*)$/.exec(line)?.[1]).find(Boolean);
  if (v1 !== undefined) {
    const dir = `/sys/fs/cgroup/memory${v1}`;
    const stat = keyed(await readFile(`${dir}/memory.stat`, 'utf8'));
    const usage = Number(await readFile(`${dir}/memory.usage_in_bytes`, 'utf8'));
    return {
      workingSetBytes: Math.max(0, usage - (stat.total_inactive_file ?? 0)),
      limitBytes: Number(await readFile(`${dir}/memory.limit_in_bytes`, 'utf8')),
      oomKills: keyed(await readFile(`${dir}/memory.oom_control`, 'utf8')).oom_kill ?? 0,
    };
  }
  const v2 = lines.map((line) => /^0::(.*)$/.exec(line)?.[1]).find(Boolean);
  if (v2 === undefined) return null;
  const dir = `/sys/fs/cgroup${v2}`;
  const stat = keyed(await readFile(`${dir}/memory.stat`, 'utf8'));
  const max = (await readFile(`${dir}/memory.max`, 'utf8')).trim();
  return {
    workingSetBytes: Math.max(
      0,
      Number(await readFile(`${dir}/memory.current`, 'utf8')) - (stat.inactive_file ?? 0),
    ),
    limitBytes: max === 'max' ? Number.POSITIVE_INFINITY : Number(max),
    oomKills: keyed(await readFile(`${dir}/memory.events`, 'utf8')).oom_kill ?? 0,
  };
}

/** `name value` lines as numbers. */
function keyed(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const [key, value] = line.trim().split(/\s+/);
    if (key && value !== undefined) out[key] = Number(value);
  }
  return out;
}
