import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/**
 * Hardening issue, point 11: the bootstrap handoff gave the one-time SSH ticket to whoever knew the task ID, and
 * administrators see task IDs (the task list, the event log). The ticket logs in as the user, into their
 * workspace: an administrator must not be able to take it.
 */
describe("attack: taking another's bootstrap handoff by its task ID", () => {
  let t: TestGateway;
  before(async () => {
    t = await startTestGateway('sqlite');
  });
  after(() => t?.close());

  it('an administrator who reads the task ID gets no ticket; the session creator does', async () => {
    const user = await t.createUser('boots');
    const egressIpId = await t.createEgressIp('198.51.100.44');
    await t.request('POST', '/v1/admin/hosts', { body: { user_id: user.id, egress_ip_id: egressIpId } });
    const created = await t.request('POST', '/v1/bootstrap/sessions', {
      token: null,
      body: { username: 'boots', password: user.password },
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    await t.gateway.tasks.idle();

    // What an administrator sees of it.
    const tasks = await t.request('GET', `/v1/admin/tasks?user_id=${user.id}`);
    const seen = JSON.stringify(tasks.body);
    assert.ok(seen.includes(created.body.task_id), 'the task is in the admin list');
    assert.ok(!seen.includes(created.body.handoff_secret), 'the secret is not');
    const handoffUrl = `/v1/bootstrap/tasks/${created.body.task_id}/handoff`;
    for (const headers of [{}, { 'x-bootstrap-secret': 'guessed' }] as Record<string, string>[]) {
      const taken = await t.request('GET', handoffUrl, { token: null, headers });
      assert.equal(taken.status, 403, JSON.stringify(taken.body));
      assert.equal(taken.body.code, 'handoff_secret_mismatch');
      assert.equal(taken.body.password, undefined);
    }
    // Another session's secret opens only that session.
    const other = await t.request('POST', '/v1/bootstrap/sessions', {
      token: null,
      body: { username: 'boots', password: user.password },
    });
    const crossed = await t.request('GET', handoffUrl, {
      token: null,
      headers: { 'x-bootstrap-secret': other.body.handoff_secret },
    });
    assert.equal(crossed.status, 403);

    const given = await t.request('GET', handoffUrl, {
      token: null,
      headers: { 'x-bootstrap-secret': created.body.handoff_secret },
    });
    assert.equal(given.status, 200, JSON.stringify(given.body));
    assert.match(given.body.password, /^ccpt_/);
  });
});
