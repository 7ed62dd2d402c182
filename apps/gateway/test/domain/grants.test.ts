import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { HostGrant, SystemGrant, TaskGrant } from '../../src/domain/access/grants.js';
import { TasksService } from '../../src/domain/tasks/tasks-service.js';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/**
 * Authorization fails closed (issue 27, point 1): the domain's host, lifecycle, task and desktop methods take a
 * grant only Access makes. A bare id does not compile (the @ts-expect-error lines below fail the type check the
 * day one would); what a cast smuggles in, or a grant stretched past its action, is refused at run time.
 */
describe('grants', () => {
  let t: TestGateway;
  let hostId: string;
  let owner: { id: string; username: string };
  before(async () => {
    t = await startTestGateway('sqlite');
    const user = await t.createUser('grace');
    owner = { id: user.id, username: 'grace' };
    const egress = await t.createEgressIp('198.51.100.21');
    hostId = (await t.createHost(user.id, egress, { start: false })).id;
  });
  after(() => t.close());

  const gateway = () => t.gateway;
  const asUser = () => ({ ...owner, role: 'user' as const });

  it('a bare id does not compile where a grant is due', () => {
    const { lifecycle, hosts } = gateway();
    // Never called: the type check is the test.
    const neverCalled = () => {
      // @ts-expect-error a host id is not a grant
      void lifecycle.start(hostId);
      // @ts-expect-error a host id is not a grant
      void lifecycle.stop(hostId);
      // @ts-expect-error a host id is not a grant
      void hosts.get(hostId);
      // @ts-expect-error a host id is not a grant
      void hosts.delete(hostId);
      // @ts-expect-error the gateway's own work needs a system grant
      void lifecycle.checkUpstreams();
    };
    assert.equal(typeof neverCalled, 'function');
  });

  it('a grant made outside Access is refused as "not found"', async () => {
    const { host } = await gateway().access.requireHost(asUser(), hostId, 'operate');
    const forged = { host, action: 'manage', actor: { kind: 'admin', id: null, username: null } };
    await assert.rejects(gateway().lifecycle.start(forged as unknown as HostGrant), { code: 'not_found' });
    await assert.rejects(gateway().hosts.delete(forged as unknown as HostGrant), { code: 'not_found' });
    await assert.rejects(
      gateway().lifecycle.checkUpstreams({ reason: 'forged' } as unknown as SystemGrant),
      /system grant/,
    );
    const tasks = new TasksService(gateway().repositories.tasks);
    assert.throws(() => tasks.get({ task: { id: 'x' } } as unknown as TaskGrant), { code: 'not_found' });
  });

  it('a grant covers its own action only: viewing is not operating, operating is not deleting', async () => {
    const view = await gateway().access.requireHost(asUser(), hostId, 'view');
    await assert.rejects(gateway().lifecycle.stop(view), { code: 'not_found' });
    const operate = await gateway().access.requireHost(asUser(), hostId, 'operate');
    await assert.rejects(gateway().hosts.delete(operate), { code: 'not_found' });
    // An owner's view grant reads the host as the owner sees it.
    assert.equal((await gateway().hosts.get(view)).id, hostId);
  });

  it("a user gets no grant for another user's host, nor for their tasks; an admin does", async () => {
    const other = await t.createUser('gus');
    await assert.rejects(
      gateway().access.requireHost({ id: other.id, username: 'gus', role: 'user' }, hostId, 'view'),
      { code: 'not_found' },
    );
    const started = await t.request('POST', `/v1/admin/hosts/${hostId}/start`);
    assert.equal(started.status, 202, JSON.stringify(started.body));
    await assert.rejects(
      gateway().access.requireTask({ id: other.id, username: 'gus', role: 'user' }, started.body.task_id),
      { code: 'not_found' },
    );
    const own = await gateway().access.requireTask(asUser(), started.body.task_id);
    assert.equal(own.task.host_id, hostId);
  });
});
