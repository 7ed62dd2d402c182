// Many interactive sessions through the proxy at once, as the SSH bench and the CI guard open them: each its own
// connection with a shell on a PTY. A session the gateway refuses, or one that goes away while held, is counted,
// never thrown: the figures of the rest still matter, and the bench must still clean up.
import { performance } from 'node:perf_hooks';
import { rssMiB } from '../lib/children.js';
import { fixed, percentile } from '../lib/report.js';
import { type Login, openShell, type Shell } from './ssh2-client.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const sortedOf = (values: number[]) => [...values].sort((a, b) => a - b);
const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** Runs `task` over `items`, `limit` at a time; failures are collected, not thrown. */
export async function pool<T, R>(
  items: T[],
  limit: number,
  task: (item: T) => Promise<R>,
): Promise<{ results: R[]; errors: unknown[] }> {
  const results: R[] = [];
  const errors: unknown[] = [];
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++]!;
      await task(item).then(
        (result) => results.push(result),
        (error: unknown) => errors.push(error),
      );
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return { results, errors };
}

export interface OpenedSessions {
  shells: Shell[];
  /** Sessions that never reached their prompt, by what the client saw (refused, closed, timed out). */
  refused: Map<string, number>;
  refusedCount: number;
  /** Connect until the prompt, ascending, ms. */
  openMs: number[];
  wallMs: number;
  /** The gateway's VmRSS before the first session and `settleMs` after the last one opened, MiB. */
  rssBeforeMiB: number | null;
  rssOpenMiB: number | null;
}

/**
 * Opens `count` sessions, `concurrency` at a time, session i logging in as `logins[i % logins.length]` (one
 * login per host: the bench spreads its sessions over hosts). Reads the gateway's RSS before, and again
 * `settleMs` after the last session opened.
 */
export async function openSessions(options: {
  logins: Login[];
  count: number;
  concurrency: number;
  gatewayPid: number;
  settleMs: number;
  /** Called with the sessions open so far, every `progressEvery`. */
  progress?: (open: number) => void;
  progressEvery?: number;
}): Promise<OpenedSessions> {
  const { logins, count, concurrency, gatewayPid, settleMs } = options;
  const rssBeforeMiB = rssMiB(gatewayPid);
  const began = performance.now();
  let opened = 0;
  const { results: shells, errors } = await pool(
    Array.from({ length: count }, (_, i) => i),
    concurrency,
    async (i) => {
      const shell = await openShell(logins[i % logins.length]!);
      opened++;
      if (options.progressEvery && opened % options.progressEvery === 0) options.progress?.(opened);
      return shell;
    },
  );
  const wallMs = performance.now() - began;
  const refused = new Map<string, number>();
  for (const error of errors) refused.set(messageOf(error), (refused.get(messageOf(error)) ?? 0) + 1);
  await sleep(settleMs);
  return {
    shells,
    refused,
    refusedCount: errors.length,
    openMs: sortedOf(shells.map((s) => s.openMs)),
    wallMs,
    rssBeforeMiB,
    rssOpenMiB: rssMiB(gatewayPid),
  };
}

export interface Echoes {
  /** Keystroke until its echo, ascending, ms. */
  latencies: number[];
  /** Sessions whose keystroke went unanswered or that closed under it. */
  failed: number;
}

/**
 * For `durationMs`, every session types a key every `intervalMs` and waits for its echo; the sessions start at
 * random offsets within the interval, so keystrokes arrive evenly rather than in bursts.
 */
export async function echoSessions(shells: Shell[], durationMs: number, intervalMs: number): Promise<Echoes> {
  const latencies: number[] = [];
  let failed = 0;
  const until = performance.now() + durationMs;
  await Promise.all(
    shells.map(async (shell) => {
      await sleep(Math.random() * intervalMs);
      while (performance.now() < until) {
        const began = performance.now();
        try {
          latencies.push(await shell.keystroke('x'));
        } catch {
          failed++;
          return;
        }
        await sleep(Math.max(0, intervalMs - (performance.now() - began)));
      }
    }),
  );
  return { latencies: sortedOf(latencies), failed };
}

/** Sessions that ended without the bench closing them. */
export const droppedOf = (shells: Shell[]) => shells.filter((shell) => shell.dropped()).length;

/** "N opened, N refused (reasons), N dropped" with the open time and the gateway's memory per session. */
export function describeSessions(opened: OpenedSessions, requested: number, dropped: number): string[] {
  const reasons = [...opened.refused]
    .sort((a, b) => b[1] - a[1])
    .map(([reason, n]) => `${n}x ${reason}`)
    .join('; ');
  return [
    `${opened.shells.length} of ${requested} sessions opened, ${opened.refusedCount} refused` +
      `${reasons ? ` (${reasons})` : ''}, ${dropped} dropped while held; opening took ` +
      `${fixed(opened.wallMs / 1000)} s; connect until the prompt p50 ${fixed(percentile(opened.openMs, 50), 0)} ms, ` +
      `p99 ${fixed(percentile(opened.openMs, 99), 0)} ms, max ${fixed(opened.openMs.at(-1) ?? Number.NaN, 0)} ms`,
    `Gateway RSS ${fixed(opened.rssBeforeMiB)} MiB before, ${fixed(opened.rssOpenMiB)} MiB with them open: ` +
      `${fixed(rssPerSessionKiB(opened), 0)} KiB per session`,
  ];
}

/** KiB of gateway RSS per open session (NaN when unknown). */
export function rssPerSessionKiB(opened: OpenedSessions): number {
  if (opened.rssBeforeMiB === null || opened.rssOpenMiB === null || opened.shells.length === 0)
    return Number.NaN;
  return ((opened.rssOpenMiB - opened.rssBeforeMiB) * 1024) / opened.shells.length;
}
