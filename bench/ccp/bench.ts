// The real ccp (its bundle, in a terminal) against a lab gateway and a real workspace: the round trip of a
// command line typed in ccp's session, and the workspace reading small files of the local project through
// ccp's sshfs mount (every read a request that ccp answers from this machine).
// Run: bash bench/run.sh ccp   (BENCH_CCP_FILES, BENCH_CCP_LINES)
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { CcpWorkspace } from '../../apps/cli/test/helpers/ccp-workspace.js';
import type { PtySession } from '../../apps/gateway/test/helpers/pty-session.js';
import { labUnavailable } from '../../test/lab/lab.js';
import { onCleanup, runBench } from '../lib/children.js';
import { fixed, percentile, printTable } from '../lib/report.js';

const bounded = (name: string, fallback: number, min: number, max: number) =>
  Math.min(max, Math.max(min, Math.floor(Number(process.env[name] ?? fallback)) || fallback));

const FILES = bounded('BENCH_CCP_FILES', 200, 10, 5000);
const LINES = bounded('BENCH_CCP_LINES', 50, 5, 1000);
const ROUNDS = 3;

await runBench('ccp bench', 20 * 60_000, async () => {
  const unavailable = labUnavailable();
  if (unavailable) throw new Error(`the ccp bench needs the network lab: ${unavailable}`);
  const w = new CcpWorkspace('bench', { session_command: 'bash --norc', mount_mode: 'sshfs-only' });
  onCleanup(() => w.stop(), 60_000);
  for (let round = 0; round < ROUNDS; round++) {
    const dir = path.join(w.project, `round-${round}`);
    mkdirSync(dir);
    for (let i = 0; i < FILES; i++) writeFileSync(path.join(dir, `file-${i}.txt`), `${'x'.repeat(2047)}\n`);
  }
  await w.start();
  const client = w.driver.client('bench');
  const began = performance.now();
  const session = w.driver.ccp(client, '--session bench');
  await session.waitFor(/ccp: mount: sshfs-only/, 600_000);
  const attachMs = performance.now() - began;

  // What a command printed between two markers the shell computes (the typed line shows them uncomputed).
  let marker = 0;
  const run = async (line: string): Promise<string> => {
    const id = ++marker;
    session.type(`echo B$((${id}*7)); ${line}; echo E$((${id}*7))\r`);
    await session.waitFor(`E${id * 7}`, 300_000);
    const screen = session.screen;
    return screen.slice(screen.lastIndexOf(`B${id * 7}`), screen.lastIndexOf(`E${id * 7}`));
  };

  const lineMs: number[] = [];
  for (let i = 0; i < LINES; i++) lineMs.push(await roundTrip(session, ++marker));
  lineMs.sort((a, b) => a - b);

  const reads: Array<{ cat: number; stat: number }> = [];
  for (let round = 0; round < ROUNDS; round++) {
    const printed = await run(
      `cd '${w.project}/round-${round}' && s=$(date +%s%N); cat file-* > /dev/null; m=$(date +%s%N); ` +
        `stat -c %s file-* > /dev/null; e=$(date +%s%N); echo "CAT $(( (m-s)/1000 )) STAT $(( (e-m)/1000 ))"; cd /`,
    );
    const match = /CAT (\d+) STAT (\d+)/.exec(printed);
    if (!match) throw new Error(`no timing in the session's output: ${printed}`);
    reads.push({ cat: Number(match[1]) / 1000, stat: Number(match[2]) / 1000 });
  }
  session.type('exit\r');
  await session.exitCode(30_000);

  console.log(
    `\nccp (bundle) in a terminal, sshfs-only mount; attached and mounted in ${fixed(attachMs, 0)} ms`,
  );
  printTable(
    ['measure', 'p50 ms', 'p90 ms', 'max ms'],
    [
      [
        `a typed command line until its output (${LINES})`,
        fixed(percentile(lineMs, 50), 2),
        fixed(percentile(lineMs, 90), 2),
        fixed(lineMs.at(-1) ?? Number.NaN, 2),
      ],
    ],
  );
  console.log(`\nThe workspace reading ${FILES} files of 2 KiB through the mount (a new folder each round)`);
  printTable(
    ['round', 'cat every file ms', 'per file ms', 'stat every file ms'],
    reads.map((read, i) => [
      String(i + 1),
      fixed(read.cat, 0),
      fixed(read.cat / FILES, 2),
      fixed(read.stat, 0),
    ]),
  );
});

/** Types a line whose output the shell computes, and times it from the first key until that output. */
async function roundTrip(session: PtySession, id: number): Promise<number> {
  const start = performance.now();
  session.type(`echo R$((${id}*7))\r`);
  await session.waitFor(`R${id * 7}`, 30_000);
  return performance.now() - start;
}
