import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { needs } from '../../../../test/support/needs.js';
import { type LabGateway, removeHostResources, startLabGateway } from '../helpers/lab-gateway.js';
import type { TestGateway } from '../helpers/test-gateway.js';

const exec = promisify(execFile);

/** Runs a shell command in a host's workspace as its user; the outcome whatever the exit code. */
async function inWorkspace(hostId: string, user: string, script: string, timeout = 60_000) {
  return exec('docker', ['exec', '--user', user, `ccp-ws-${hostId}`, 'sh', '-c', script], { timeout }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code?: number; stdout?: string; stderr?: string }) => ({
      code: error.code ?? -1,
      stdout: error.stdout ?? '',
      stderr: error.stderr ?? '',
    }),
  );
}

const containerRunning = async (name: string) =>
  (await exec('docker', ['inspect', '--format', '{{.State.Running}}', name])).stdout.trim() === 'true';

/**
 * A host's limits hold inside its real workspace: a process allocating past the memory limit is killed (its
 * workspace, the egress gateway and the gateway stay), forks stop at the process limit, and writing past the
 * home's size fails there while another host's home is unaffected.
 */
describe('resource limits in real workspaces', { skip: needs('lab', 'docker'), timeout: 900_000 }, () => {
  let lab: LabGateway;
  let t: TestGateway;
  const made: string[] = [];

  before(async () => {
    // Resource checks every second, so the memory alert shows while the test looks.
    lab = await startLabGateway({ RESOURCE_CHECK_SECONDS: '1' });
    t = lab.t;
  });
  after(async () => {
    for (const id of made) await t.request('DELETE', `/v1/admin/hosts/${id}`).catch(() => {});
    await lab?.close();
    await removeHostResources(made);
  });

  const host = async (username: string, resources: Record<string, number>) => {
    const user = await t.createUser(username);
    const created = await t.request('POST', '/v1/admin/hosts', {
      body: { user_id: user.id, egress_ip_id: lab.egressIpId, resources },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    made.push(created.body.id);
    await lab.startHost(created.body.id);
    return created.body.id as string;
  };

  it('kills a process allocating past the memory limit, and only it', async () => {
    const id = await host('mem', { memory_mb: 256 });
    const hog = await inWorkspace(
      id,
      'mem',
      `node -e 'const a = []; for (;;) a.push(Buffer.alloc(16 << 20, 1))'`,
    );
    assert.equal(hog.code, 137, `the hog was not killed: ${JSON.stringify(hog)}`);
    assert.ok(await containerRunning(`ccp-ws-${id}`), 'the workspace went down with it');
    assert.ok(await containerRunning(`ccp-egress-${id}`), 'the egress gateway went down');
    assert.equal((await t.request('GET', '/healthz', { token: null })).status, 200);
    assert.equal((await inWorkspace(id, 'mem', 'echo alive')).stdout.trim(), 'alive');
    // The kill is an event and shows on the host.
    const until = Date.now() + 15_000;
    let alerts: { kind: string }[] = [];
    while (Date.now() < until) {
      alerts = (await t.request('GET', `/v1/admin/hosts/${id}`)).body.resource_alerts;
      if (alerts.some((a) => a.kind === 'memory_oom_kill')) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    assert.ok(
      alerts.some((a) => a.kind === 'memory_oom_kill'),
      JSON.stringify(alerts),
    );
    const events = await t.request('GET', `/v1/admin/events?host_id=${id}&type=host.memory_oom_kill`);
    assert.equal(events.body.events.length, 1);
  });

  it('stops forks at the process limit', async () => {
    const id = await host('pids', { pids: 64 });
    // node, not sh: a shell gives up at its first failed fork.
    const forks = await inWorkspace(
      id,
      'pids',
      `node -e 'const { spawn } = require("node:child_process"); let failed = 0;
        for (let i = 0; i < 150; i++) spawn("sleep", ["20"], { detached: true, stdio: "ignore" }).on("error", () => failed++);
        setTimeout(() => { console.log("failed", failed); process.exit(0); }, 3000)'; echo started $(pgrep -c -u pids sleep)`,
    );
    assert.match(forks.stdout, /failed [1-9]/, JSON.stringify(forks));
    const started = Number(/started (\d+)/.exec(forks.stdout)?.[1] ?? 'NaN');
    assert.ok(started < 64, `${started} sleeps ran under a limit of 64: ${JSON.stringify(forks)}`);
    assert.ok(started > 10, `hardly any fork succeeded: ${JSON.stringify(forks)}`);
    await inWorkspace(id, 'pids', 'pkill -u pids sleep; true');
  });

  it('fails a write past the home size inside the workspace, and leaves another host unaffected', async () => {
    const small = await host('tiny', { home_mb: 64 });
    const other = await host('roomy', { home_mb: 256 });
    const full = await inWorkspace(small, 'tiny', 'dd if=/dev/zero of=$HOME/big bs=1M count=100 2>&1');
    assert.notEqual(full.code, 0, JSON.stringify(full));
    assert.match(full.stdout + full.stderr, /No space left on device/);
    const df = await inWorkspace(small, 'tiny', 'df -m --output=size $HOME | tail -1');
    assert.ok(Number(df.stdout.trim()) <= 64, df.stdout);
    const fine = await inWorkspace(other, 'roomy', 'dd if=/dev/zero of=$HOME/big bs=1M count=100 2>&1');
    assert.equal(fine.code, 0, JSON.stringify(fine));
    // The nearly full home is an event and shows on its host.
    const until = Date.now() + 15_000;
    let alerts: { kind: string }[] = [];
    while (Date.now() < until) {
      alerts = (await t.request('GET', `/v1/admin/hosts/${small}`)).body.resource_alerts;
      if (alerts.some((a) => a.kind === 'home_nearly_full')) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    assert.ok(
      alerts.some((a) => a.kind === 'home_nearly_full'),
      JSON.stringify(alerts),
    );
    // Grown while stopped, the home keeps its files and takes the write at the next start.
    await t.request('POST', `/v1/admin/hosts/${small}/stop`);
    await t.gateway.tasks.settled(small);
    const grown = await t.request('PUT', `/v1/admin/hosts/${small}/resources`, { body: { home_mb: 256 } });
    assert.equal(grown.status, 200, JSON.stringify(grown.body));
    await lab.startHost(small);
    assert.equal((await inWorkspace(small, 'tiny', 'test -f $HOME/big && echo kept')).stdout.trim(), 'kept');
    const after = await inWorkspace(
      small,
      'tiny',
      'rm -f $HOME/big; dd if=/dev/zero of=$HOME/big bs=1M count=100 2>&1',
    );
    assert.equal(after.code, 0, JSON.stringify(after));
  });
});
