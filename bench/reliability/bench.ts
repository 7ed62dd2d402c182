// The reliability suite's long form (issue 17): the engine of apps/gateway/test/ops/reliability.test.ts run for a
// duration instead of a number of steps; it prints what ran and which invariants held how many times.

import {
  describeReport,
  ReliabilityRun,
  seedFromEnvironment,
} from '../../apps/gateway/test/helpers/reliability.js';
import { onCleanup, runBench } from '../lib/children.js';

/** A whole number from the environment within [min, max]; 0 is a value here (no dockerd restart), not unset. */
const bounded = (name: string, fallback: number, min: number, max: number) => {
  const value = Math.floor(Number(process.env[name] ?? fallback));
  return Number.isFinite(value) ? Math.min(max, Math.max(min, value)) : fallback;
};

const MINUTES = bounded('BENCH_RELIABILITY_MINUTES', 10, 1, 240);
const DOCKERD_RESTARTS = bounded('BENCH_RELIABILITY_DOCKERD', 2, 0, 20);

// The last step may start just before the duration ends, and may take a few minutes (a dockerd restart).
await runBench('reliability', (MINUTES + 15) * 60_000, async () => {
  const seed = seedFromEnvironment();
  const began = new Date();
  console.log(
    `reliability: seed ${seed}, ${MINUTES} min, at most ${DOCKERD_RESTARTS} dockerd restarts, from ${began.toISOString()}`,
  );
  const run = new ReliabilityRun({
    seed,
    durationMs: MINUTES * 60_000,
    dockerdRestarts: DOCKERD_RESTARTS,
    log: (line) =>
      console.log(`[${((Date.now() - began.getTime()) / 1000).toFixed(0).padStart(4)} s] ${line}`),
  });
  onCleanup(() => run.tearDown(), 60_000);
  const report = await run.run();
  console.log('');
  for (const line of describeReport(report)) console.log(line);
  if (report.failure) process.exitCode = 1;
});
