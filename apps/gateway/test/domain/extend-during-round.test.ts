import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { WorkspaceActivityProbe } from '../../src/runtime/workspace-activity.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const MINUTE = 60_000;

// A round reads every host, then asks each quiet workspace's terminals (a command in it, seconds on a loaded
// machine) before it writes its decision. An extend asked in that time must hold: the round decided on the row
// it read, and may neither write its old plan over the extend nor stop the host at the stop just moved.
for (const kind of DATABASES) {
  describe(`an extend asked while a lifecycle round reads the host's terminals holds (${kind})`, () => {
    let t: TestGateway;
    let now = Math.ceil(Date.now() / MINUTE) * MINUTE + MINUTE;
    /** Where a round should wait (reading the terminals, telling them of a stop) until the test lets it go on. */
    let hold: { at: 'read' | 'tell'; reached: () => void; release: Promise<void> } | null = null;
    const waitIfHeld = async (at: 'read' | 'tell') => {
      if (hold?.at !== at) return;
      hold.reached();
      await hold.release;
    };
    const probe: WorkspaceActivityProbe = {
      sample: async () => ({ cpuSeconds: 0, networkBytes: 0, pid: 1 }),
      terminalOutputAt: async () => {
        await waitIfHeld('read');
        return null;
      },
      tellTerminals: async () => waitIfHeld('tell'),
    };
    /** Holds the next round at `at`: resolves once it waits there, with what lets it go on. */
    const holdAt = async (at: 'read' | 'tell', round: () => Promise<void>) => {
      let reached = () => {};
      const waiting = new Promise<void>((resolve) => {
        reached = resolve;
      });
      let release = () => {};
      hold = {
        at,
        reached,
        release: new Promise<void>((resolve) => {
          release = resolve;
        }),
      };
      const running = round();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        waiting,
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error(`the round did not reach "${at}" within 10 s`)), 10_000);
        }),
      ]).finally(() => clearTimeout(timer));
      return async () => {
        hold = null;
        release();
        await running;
      };
    };

    before(async () => {
      t = await startTestGateway(kind, { HOST_STOP_WARNING_SECONDS: '60' }, undefined, {
        activityProbe: probe,
        clock: () => now,
      });
    });
    after(() => t?.close());

    const host = async (id: string) => (await t.request('GET', `/v1/admin/hosts/${id}`)).body;
    /** A running host of a new user that may run 10 minutes from its start. */
    const hostWithLifetime = async (username: string, egressAddress: string) => {
      const user = await t.createUser(username);
      const created = await t.createHost(user.id, await t.createEgressIp(egressAddress));
      const set = await t.request('PUT', `/v1/admin/hosts/${created.id}/lifecycle-policy`, {
        body: { idle_timeout_seconds: null, max_lifetime_seconds: 600, schedule: null },
      });
      assert.equal(set.status, 200, JSON.stringify(set.body));
      const lifetimeEnd = Date.parse((await host(created.id)).started_at) + 600_000;
      return { user, id: created.id, lifetimeEnd };
    };
    /** The owner extends by 10 minutes, as ccp does; the plan it answers with. */
    const extendAsOwner = async (token: string, id: string) => {
      const extended = await t.request('POST', `/v1/user/hosts/${id}/extend`, {
        token,
        body: { seconds: 600 },
      });
      assert.equal(extended.status, 200, JSON.stringify(extended.body));
      return extended.body.lifecycle.planned_stop;
    };

    it('keeps the host running until the extended stop, the plan showing it', async () => {
      const { user, id, lifetimeEnd } = await hostWithLifetime('extender', '198.51.100.92');

      now = lifetimeEnd - 30_000;
      await t.gateway.lifecycleScheduler.round();
      const warned = (await host(id)).lifecycle.planned_stop;
      assert.notEqual(warned.warned_at, null, 'warned a minute ahead');

      // The stop is due; the round that would make it waits in the terminals' read while the owner extends.
      now = lifetimeEnd + 31_000;
      const goOn = await holdAt('read', () => t.gateway.lifecycleScheduler.round());
      const until = (await extendAsOwner(user.token, id)).at;
      assert.equal(Date.parse(until), now + 600_000);
      await goOn();
      await t.gateway.tasks.idle();

      const after = await host(id);
      assert.equal(after.status, 'running', 'not stopped at the stop the extend moved');
      assert.equal(after.lifecycle.planned_stop.at, until);
      assert.equal(after.lifecycle.planned_stop.warned_at, null);
      const stops = (await t.request('GET', `/v1/admin/events?host_id=${id}&type=host.policy_stop`)).body;
      assert.equal(stops.events.length, 0);

      // The next round plans from the extend, and stops the host a warning after it comes.
      await t.gateway.lifecycleScheduler.round();
      assert.equal((await host(id)).lifecycle.planned_stop.at, until);
      now = Date.parse(until) - 30_000;
      await t.gateway.lifecycleScheduler.round();
      now = Date.parse(until) + 31_000;
      await t.gateway.lifecycleScheduler.round();
      await t.gateway.tasks.idle();
      assert.equal((await host(id)).status, 'stopped');
    });

    it('leaves the warning taken back by an extend asked while the round told the terminals', async () => {
      const { user, id, lifetimeEnd } = await hostWithLifetime('teller', '198.51.100.93');
      // Its warning is due: the clock, moved far ahead for the host before, goes back to this one's.
      now = lifetimeEnd - 30_000;
      const goOn = await holdAt('tell', () => t.gateway.lifecycleScheduler.round());
      const extended = await extendAsOwner(user.token, id);
      await goOn();
      const planned = (await host(id)).lifecycle.planned_stop;
      assert.equal(planned.at, extended.at);
      assert.equal(planned.warned_at, null, 'the extend took the warning back');
    });
  });
}
