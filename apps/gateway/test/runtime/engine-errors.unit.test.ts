import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { asRuntimeError } from '../../src/runtime/engine-errors.js';

/** An error as dockerode makes it from an engine's answer: its status and the engine's message. */
const engineAnswer = (statusCode: number, reason: string) =>
  Object.assign(new Error(`(HTTP code ${statusCode}) ${reason}`), { statusCode });

describe('engine errors as the API reports them', () => {
  it("an engine's own failure (5xx) is 503 with its words and what to do, not a bare 500", () => {
    const error = asRuntimeError(
      engineAnswer(
        500,
        'server error - Could not kill running container 29f445ac7c3d, cannot remove - tried to kill container, but did not receive an exit event',
      ),
    );
    assert.equal(error.kind, 'unavailable');
    assert.equal(error.code, 'runtime_unavailable');
    assert.match(error.message, /the container engine failed: .*did not receive an exit event/);
    assert.match(error.message, /try again, and if it keeps failing see `systemctl status docker`/);
  });

  it('an engine that cannot be reached is 503; any other answer stays an internal failure', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED /var/run/docker.sock'), {
      code: 'ECONNREFUSED',
      syscall: 'connect',
    });
    assert.equal(asRuntimeError(refused).kind, 'unavailable');
    const conflict = asRuntimeError(engineAnswer(409, 'conflict - the container name is already in use'));
    assert.equal(conflict.kind, 'internal');
    assert.equal(conflict.code, 'runtime_failed');
  });
});
