/**
 * Issue 28's guard in CI: `bench/guard/bench.ts` (also `bash bench/run.sh guard`) moves 64 MiB each way through
 * the SSH proxy and directly, opens 50 interactive sessions and times 3 host starts beside 3 raw `docker run`s.
 * It fails only on a collapse (the proxy below 50 % of direct, a start above 5x raw, a session that does not
 * open) and prints its figures here; the targets stay with the benches.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { after, describe, it } from 'node:test';
import { needs } from '../../../../test/support/needs.js';

const ROOT = path.resolve(import.meta.dirname, '../../../..');
/** The guard's own deadline is 5 minutes; it cleans up on SIGTERM. */
const TIMEOUT_MS = 330_000;

describe('performance guard (bench/guard)', {
  skip: needs('lab', 'docker', 'root'),
  timeout: TIMEOUT_MS,
}, () => {
  let guard: ChildProcess | undefined;
  after(async () => {
    if (guard && guard.exitCode === null && guard.signalCode === null) {
      const exited = new Promise((resolve) => guard?.once('exit', resolve));
      guard.kill('SIGTERM');
      await exited;
    }
  });

  it('no path collapsed: the proxy at least half of direct, starts within 3x raw, all 50 sessions open', async () => {
    guard = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', 'bench/guard/bench.ts'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output: string[] = [];
    for (const stream of [guard.stdout, guard.stderr])
      createInterface({ input: stream! }).on('line', (line) => {
        output.push(line);
        console.log(line);
      });
    const code = await new Promise<number | null>((resolve) => guard?.once('exit', resolve));
    const collapsed = output.find((line) => line.startsWith('Perf guard: ') && line.includes('collapsed'));
    assert.equal(
      code,
      0,
      code === 3
        ? (collapsed ?? 'a path collapsed')
        : `the guard failed (exit ${code}): ${output.slice(-5).join('\n')}`,
    );
  });
});
