/**
 * Issue 17: three hosts on three upstreams over the lab's two exits under random operations and faults (seeded;
 * RELIABILITY_SEED replays a run), with every invariant checked after each step. The long form is
 * `bash bench/run.sh reliability`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { needs } from '../../../../test/support/needs.js';
import { describeReport, ReliabilityRun, seedFromEnvironment } from '../helpers/reliability.js';

describe('reliability under random operations and faults', {
  skip: needs('lab', 'docker', 'root'),
  timeout: 900_000,
}, () => {
  it('keeps every invariant over 20 random steps, every kind at least once (one dockerd restart)', async () => {
    const seed = seedFromEnvironment();
    console.log(`reliability seed ${seed} (replay: RELIABILITY_SEED=${seed})`);
    const report = await new ReliabilityRun({
      seed,
      steps: 20,
      dockerdRestarts: 1,
      log: (line) => console.log(line),
    }).run();
    for (const line of describeReport(report)) console.log(line);
    assert.equal(report.failure, null);
    assert.equal(report.steps, 20);
  });
});
