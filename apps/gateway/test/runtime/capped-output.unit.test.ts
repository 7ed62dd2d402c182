import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, it } from 'node:test';
import { cappedOutput, EXEC_OUTPUT_CAP } from '../../src/runtime/capped-output.js';

const write = (sink: NodeJS.WritableStream, chunk: Buffer) =>
  new Promise<void>((resolve, reject) => sink.write(chunk, (error) => (error ? reject(error) : resolve())));

describe('capped output', () => {
  it('keeps everything below the cap, and exactly the cap, without a mark', async () => {
    let overflows = 0;
    const small = cappedOutput(EXEC_OUTPUT_CAP, () => overflows++);
    await write(small.sink, Buffer.from('{"status":"running"}\n'));
    assert.equal(small.text(), '{"status":"running"}\n');
    assert.equal(small.truncated(), false);

    const full = cappedOutput(8, () => overflows++);
    await write(full.sink, Buffer.from('abcd'));
    await write(full.sink, Buffer.from('efgh'));
    assert.equal(full.text(), 'abcdefgh');
    assert.equal(full.truncated(), false);
    assert.equal(overflows, 0);
  });

  it('keeps the first bytes up to the cap, drops the rest, marks it and tells its owner once', async () => {
    let overflows = 0;
    const output = cappedOutput(10, () => overflows++);
    for (const chunk of ['abcdef', 'ghijkl', 'mnop', 'qrst']) await write(output.sink, Buffer.from(chunk));
    assert.equal(output.text(), 'abcdefghij', 'the chunk across the cap is cut at the cap');
    assert.equal(output.truncated(), true);
    assert.equal(overflows, 1);
  });

  it('drains a flood of several times the cap without stalling its source, keeping only the cap', async () => {
    let overflows = 0;
    const output = cappedOutput(EXEC_OUTPUT_CAP, () => overflows++);
    const chunk = Buffer.from('y\n'.repeat(16 * 1024));
    let produced = 0;
    // Draining (not destroying) is the owner's choice: the sink itself takes every write and keeps the cap.
    await pipeline(
      Readable.from(
        (function* () {
          while (produced < 8 * EXEC_OUTPUT_CAP) {
            produced += chunk.length;
            yield chunk;
          }
        })(),
      ),
      output.sink,
    );
    assert.equal(produced, 8 * EXEC_OUTPUT_CAP);
    const text = output.text();
    assert.equal(Buffer.byteLength(text), EXEC_OUTPUT_CAP);
    assert.equal(text, 'y\n'.repeat(EXEC_OUTPUT_CAP / 2));
    assert.equal(output.truncated(), true);
    assert.equal(overflows, 1);
  });
});
