import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { WorkspaceActivityProbe } from '../../src/runtime/workspace-activity.js';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const MINUTE = 60_000;
/** As the API writes instants: whole seconds. */
const instant = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');

// Reading a workspace's terminals is a command run in it (`docker exec tmux …`), dear on a gateway with many
// hosts; the lifecycle round reads them only for a host whose CPU and network showed nothing.
describe("the lifecycle round asks a workspace's terminals only when nothing else showed activity", () => {
  let t: TestGateway;
  let now = Math.ceil(Date.now() / MINUTE) * MINUTE + MINUTE;
  const busyCpu = new Map<string, number>();
  const terminalReads: string[] = [];
  const terminalOutputAt = now - 30_000;
  const probe: WorkspaceActivityProbe = {
    // Between the rounds, a minute apart, the busy host's cgroup uses 30 CPU seconds; the quiet one's none.
    sample: async (hostId) => ({ cpuSeconds: busyCpu.get(hostId) ?? 0, networkBytes: 0, pid: 1 }),
    terminalOutputAt: async (hostId) => {
      terminalReads.push(hostId);
      return terminalOutputAt;
    },
    tellTerminals: async () => {},
  };

  before(async () => {
    t = await startTestGateway('sqlite', {}, undefined, {
      activityProbe: probe,
      clock: () => now,
    });
  });
  after(() => t?.close());

  it('reads the quiet host’s terminals and not the busy one’s; both record their activity', async () => {
    const user = await t.createUser('rounds');
    const egress = await t.createEgressIp('198.51.100.91');
    const busy = (await t.createHost(user.id, egress)).id as string;
    const quiet = (await t.createHost(user.id, egress)).id as string;
    busyCpu.set(busy, 10);
    await t.gateway.lifecycleScheduler.round();
    now += MINUTE;
    busyCpu.set(busy, 40);
    terminalReads.length = 0;
    await t.gateway.lifecycleScheduler.round();

    assert.deepEqual(terminalReads, [quiet]);
    const lifecycle = async (id: string) =>
      (await t.request('GET', `/v1/admin/hosts/${id}`)).body.lifecycle as Record<string, unknown>;
    const busyNow = await lifecycle(busy);
    assert.equal(busyNow.last_activity_signal, 'cpu');
    assert.equal(busyNow.last_activity_at, instant(now));
    const quietNow = await lifecycle(quiet);
    assert.equal(quietNow.last_activity_signal, 'terminal');
    assert.equal(quietNow.last_activity_at, instant(terminalOutputAt));
  });
});
