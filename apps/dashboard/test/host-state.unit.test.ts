import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ALREADY_RUNNING, type Host, type Task } from '@ccp/api';
import { canStart, failedHostNextStep, taskToShow } from '../src/host-state.js';

const task = (id: string, kind: string, status: Task['status'], message = ''): Task => ({
  id,
  kind,
  host_id: null,
  node: null,
  user_id: null,
  status,
  progress: 100,
  stage: 'done',
  message,
  error: null,
  requested_by: 'admin:admin',
  created_at: '2026-01-01T00:00:00Z',
  started_at: null,
  finished_at: null,
});

describe("the task a host's page shows", () => {
  it('passes over starts that found the host running', () => {
    const tasks = [
      task('b2', 'bootstrap', 'succeeded', ALREADY_RUNNING),
      task('s2', 'start', 'succeeded', ALREADY_RUNNING),
      task('s1', 'start', 'succeeded', 'running through exit one'),
    ];
    assert.equal(taskToShow(tasks)?.id, 's1');
  });

  it('keeps a running or failed task, and the newest when nothing else changed anything', () => {
    assert.equal(taskToShow([task('b', 'bootstrap', 'running'), task('s', 'start', 'succeeded')])?.id, 'b');
    assert.equal(taskToShow([task('b', 'bootstrap', 'succeeded', ALREADY_RUNNING)])?.id, 'b');
    assert.equal(taskToShow([]), null);
  });
});

describe("a failed host's next step", () => {
  const host = (bindings: number) => ({ bindings: Array.from({ length: bindings }, () => ({})) }) as Host;
  it('is to start it again when it has an egress IP, else to ask the administrator', () => {
    assert.equal(failedHostNextStep(host(1)).canRetry, true);
    assert.match(failedHostNextStep(host(1)).text, /Press Start to try again/);
    assert.equal(failedHostNextStep(host(0)).canRetry, false);
    assert.match(failedHostNextStep(host(0)).text, /Ask your administrator/);
  });
  it('is not Start at all without an egress IP: the portal offers no Start its owner cannot use', () => {
    assert.equal(canStart(host(0)), false);
    assert.equal(canStart(host(2)), true);
  });
});
