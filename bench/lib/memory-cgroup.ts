import { readFile } from 'node:fs/promises';

/**
 * The memory cgroup directory of a process, cgroup v1 or v2, and the names of what to read there: the usage, and
 * in memory.stat the inactive page cache and all page cache.
 */
export async function memoryCgroup(pid: number) {
  const lines = (await readFile(`/proc/${pid}/cgroup`, 'utf8')).split('\n');
  const v1 = lines.map((line) => /^\d+:(?:[^:]*,)?memory(?:,[^:]*)?:(.*)$/.exec(line)?.[1]).find(Boolean);
  if (v1 !== undefined)
    return {
      dir: `/sys/fs/cgroup/memory${v1}`,
      usage: 'memory.usage_in_bytes',
      inactive: 'total_inactive_file',
      file: 'total_cache',
    };
  const v2 = lines.map((line) => /^0::(.*)$/.exec(line)?.[1]).find(Boolean);
  if (v2 === undefined) throw new Error(`no memory cgroup for process ${pid}`);
  return { dir: `/sys/fs/cgroup${v2}`, usage: 'memory.current', inactive: 'inactive_file', file: 'file' };
}
