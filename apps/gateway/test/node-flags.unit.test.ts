import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { GATEWAY_NODE_FLAGS, HEAP_FLAGS, heapFlagsWarning, missingHeapFlags } from '../src/node-flags.js';

const ROOT = path.resolve(import.meta.dirname, '../../..');
const MAIN = 'apps/gateway/dist/main.js';

/** The words of a command line from node to the gateway's main module. */
function nodeCommand(line: string): string[] {
  const words = line.trim().split(/\s+/);
  const node = words.indexOf('node');
  assert.notEqual(node, -1, `no node in ${line}`);
  return words.slice(node + 1, words.indexOf(MAIN) + 1);
}

describe("the gateway's node flags", () => {
  it('are the flags of `npm start` and of the systemd unit, before the main module', () => {
    const start = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts.start as string;
    const unit = readFileSync(path.join(ROOT, 'deploy/cloud-cli-proxy.service'), 'utf8');
    const execStart = unit.split('\n').find((line) => line.startsWith('ExecStart='));
    assert.ok(execStart, 'the unit has an ExecStart line');
    for (const command of [start, execStart])
      assert.deepEqual(nodeCommand(command), [...GATEWAY_NODE_FLAGS, MAIN]);
  });

  it('finds the heap flags on the command line or in NODE_OPTIONS, by name, with dashes or underscores', () => {
    assert.deepEqual(missingHeapFlags([]), [...HEAP_FLAGS]);
    assert.deepEqual(missingHeapFlags([...GATEWAY_NODE_FLAGS]), []);
    assert.deepEqual(missingHeapFlags(['--max-semi-space-size=4']), ['--heap-growing-percent=100']);
    assert.deepEqual(missingHeapFlags([], ' --heap_growing_percent=50  --max_semi_space_size=1 '), []);
    assert.deepEqual(missingHeapFlags(['--enable-source-maps'], '--max-semi-space-size=1'), [
      '--heap-growing-percent=100',
    ]);
  });

  it('warn with what is missing and how to start the gateway, and are silent when given', () => {
    const warning = heapFlagsWarning(['--max-semi-space-size=1'], undefined);
    assert.match(warning ?? '', /^node was started without --heap-growing-percent=100: /);
    assert.match(
      warning ?? '',
      /`npm start` or the systemd unit, or as `node --enable-source-maps --max-semi-space-size=1 --heap-growing-percent=100 apps\/gateway\/dist\/main.js`$/,
    );
    assert.equal(heapFlagsWarning([...HEAP_FLAGS], undefined), null);
  });
});
