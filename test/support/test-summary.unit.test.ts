import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { render, summarize } from './test-summary.js';

const exec = promisify(execFile);

/**
 * A run as scripts/test.sh makes one: two files, with a skipped suite, a skipped test, a failure and a test its
 * failed set-up cancelled.
 */
const FILE = `import { before, describe, it } from 'node:test';
describe('real workspaces', { skip: 'the network lab needs root (ip netns)' }, () => {
  it('starts a host', () => {});
  it('stops it', () => {});
});
describe('the dashboard', () => {
  it('signs in', () => {});
  it('draws the desktop', { skip: 'no Chromium at /usr/bin/chromium' }, () => {});
});
it('fails', () => { throw new Error('no'); });
describe('a set-up that fails', () => {
  before(() => { throw new Error('the host did not start'); });
  it('is never run', () => {});
});
`;

describe("the run's summary", () => {
  it('counts passes, failures and skips, and names every skipped suite and test with its reason', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ccp-summary-'));
    try {
      writeFileSync(path.join(dir, 'a.test.mjs'), FILE);
      writeFileSync(path.join(dir, 'b.test.mjs'), FILE.replace('real workspaces', 'the lab'));
      const tap = path.join(dir, 'results.tap');
      const ownRun = { ...process.env };
      delete ownRun.NODE_TEST_CONTEXT;
      await exec(
        process.execPath,
        ['--test', '--test-reporter=tap', `--test-reporter-destination=${tap}`, 'a.test.mjs', 'b.test.mjs'],
        // Not as a child of this run: Node would report to it instead of writing the file.
        { cwd: dir, env: ownRun },
      ).catch(() => {});
      const summary = summarize(readFileSync(tap, 'utf8'));
      assert.equal(summary.passed, 2);
      assert.equal(summary.failed, 4);
      assert.deepEqual(summary.skipped, [
        { name: 'real workspaces', kind: 'suite', reason: 'the network lab needs root (ip netns)' },
        {
          name: 'the dashboard › draws the desktop',
          kind: 'test',
          reason: 'no Chromium at /usr/bin/chromium',
        },
        { name: 'the lab', kind: 'suite', reason: 'the network lab needs root (ip netns)' },
        {
          name: 'the dashboard › draws the desktop',
          kind: 'test',
          reason: 'no Chromium at /usr/bin/chromium',
        },
      ]);
      assert.equal(
        render(summary).trimEnd().split('\n').at(-1),
        '2 passed, 4 failed, 4 skipped (2 whole suites, whose tests are not counted)',
      );
      assert.match(
        render(summary),
        /^ {2}skipped suite real workspaces: the network lab needs root \(ip netns\)$/m,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says a clean run is clean', () => {
    assert.equal(render({ passed: 3, failed: 0, skipped: [] }), '3 passed, 0 failed, 0 skipped\n');
  });
});
