/**
 * The closing lines of a test run (scripts/test.sh), read from its TAP file: every skipped suite or test with its
 * reason, then "N passed, N failed, N skipped". A run without root skips whole suites (Docker, the lab, the
 * browser), and Node's own counts leave the tests of a skipped suite out, so without this such a run looks green.
 *
 *   npx tsx test/support/test-summary.ts test-output/results.tap
 */
import { readFileSync } from 'node:fs';

export interface Skipped {
  /** The enclosing suites and the name, joined with " › " (Node's TAP does not name the file). */
  name: string;
  kind: 'suite' | 'test';
  reason: string;
}

export interface Summary {
  passed: number;
  failed: number;
  skipped: Skipped[];
}

const SUBTEST = /^( *)# Subtest: (.*)$/;
const RESULT = /^( *)(?:not )?ok \d+ - (.*?)(?: # SKIP(?: (.*))?)?$/;
const SKIP = / # SKIP(?: |$)/;
// Cancelled: tests that never ran because a hook of theirs failed, or their file ended first. They count as failed.
const TOTAL = /^# (pass|fail|cancelled) (\d+)$/;

/** Reads Node's TAP reporter output: each level of nesting is indented by 4 spaces. */
export function summarize(tap: string): Summary {
  const lines = tap.split('\n');
  const path: string[] = [];
  const summary: Summary = { passed: 0, failed: 0, skipped: [] };
  lines.forEach((line, index) => {
    const subtest = SUBTEST.exec(line);
    if (subtest) {
      const depth = subtest[1]!.length / 4;
      path.length = depth;
      path[depth] = subtest[2]!;
      return;
    }
    const result = RESULT.exec(line);
    if (result && SKIP.test(line)) {
      const depth = result[1]!.length / 4;
      // The YAML block after the line says whether a suite or a test was skipped.
      const block = lines.slice(index + 1, index + 6).join('\n');
      summary.skipped.push({
        name: [...path.slice(0, depth), result[2]!].join(' › '),
        kind: /type: 'suite'/.test(block) ? 'suite' : 'test',
        reason: result[3]?.trim() || 'no reason given',
      });
      return;
    }
    const total = TOTAL.exec(line);
    if (total?.[1] === 'pass') summary.passed = Number(total[2]);
    else if (total) summary.failed += Number(total[2]);
  });
  return summary;
}

export function render(summary: Summary): string {
  const suites = summary.skipped.filter((skip) => skip.kind === 'suite').length;
  const head = `${summary.passed} passed, ${summary.failed} failed, ${summary.skipped.length} skipped`;
  if (summary.skipped.length === 0) return `${head}\n`;
  const lines = summary.skipped.map((skip) => `  skipped ${skip.kind} ${skip.name}: ${skip.reason}`);
  const note = suites > 0 ? ` (${suites} whole suites, whose tests are not counted)` : '';
  // The counts close the run, below the list, where CI and a reader look for them.
  return `${lines.join('\n')}\n${head}${note}\n`;
}

if (process.argv[1] && import.meta.filename === process.argv[1]) {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: test-summary.ts <results.tap>\n');
    process.exit(2);
  }
  process.stdout.write(render(summarize(readFileSync(file, 'utf8'))));
}
