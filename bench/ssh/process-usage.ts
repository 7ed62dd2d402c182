// CPU and memory of one process over a stretch of time, read from /proc/<pid>/stat and /proc/<pid>/status.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { rssMiB, sampleRss } from '../lib/children.js';

/** Clock ticks per second of the stat file's times (USER_HZ, 100 on nearly every Linux). */
const TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** User plus system CPU seconds the process has used so far. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // "pid (comm) state ppid …": after the last ')', utime and stime are the 12th and 13th fields.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS;
}

export interface Usage {
  /** CPU time over wall time, in percent of one CPU. */
  cpuPercent: number;
  rssStartMiB: number | null;
  rssPeakMiB: number | null;
  rssEndMiB: number | null;
  seconds: number;
}

/** Starts measuring `pid`; `stop()` returns what it used since. */
export function measureUsage(pid: number): { stop(): Usage } {
  const began = performance.now();
  const cpuStart = cpuSeconds(pid);
  const rssStartMiB = rssMiB(pid);
  const peak = sampleRss(pid);
  return {
    stop() {
      const seconds = (performance.now() - began) / 1000;
      const cpu = cpuSeconds(pid) - cpuStart;
      return {
        cpuPercent: (100 * cpu) / seconds,
        rssStartMiB,
        rssPeakMiB: peak.stop(),
        rssEndMiB: rssMiB(pid),
        seconds,
      };
    },
  };
}

/** The machine's CPU times so far from /proc/stat: busy, stolen by the hypervisor, and all, in ticks. */
function machineTicks(): { busy: number; steal: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  // cpu  user nice system idle iowait irq softirq steal guest guest_nice
  const [user, nice, system, idle, iowait, irq, softirq, steal] = line
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const busy = (user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0);
  return { busy, steal: steal ?? 0, total: busy + (idle ?? 0) + (iowait ?? 0) + (steal ?? 0) };
}

/**
 * Starts measuring the whole machine; `stop()` gives the share of all its CPUs that was busy, and the share
 * the hypervisor took (steal): a path that keeps every CPU busy slows down with any extra process.
 */
export function measureMachine(): { stop(): { busyPercent: number; stealPercent: number } } {
  const start = machineTicks();
  return {
    stop() {
      const end = machineTicks();
      const total = Math.max(1, end.total - start.total);
      return {
        busyPercent: (100 * (end.busy - start.busy)) / total,
        stealPercent: (100 * (end.steal - start.steal)) / total,
      };
    },
  };
}
