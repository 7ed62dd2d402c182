import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import Docker from 'dockerode';
import {
  ensureLab,
  type LabDescription,
  readSourceCounters,
  resetSourceCountersWhenQuiet,
} from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import type { UplinkPolicy } from '../../src/egress/uplink-guard.js';
import { UPLINK_NETWORK } from '../../src/runtime/container-specs.js';
import {
  api,
  type GatewayProcess,
  startLabGatewayProcessWithHost,
  waitForTask,
} from '../helpers/gateway-process.js';
import { buildTestImages } from '../helpers/lab-egress.js';
import { removeHostResources } from '../helpers/lab-gateway.js';
import { probeInNetns, probeInWorkspace, takeOverGateway } from '../helpers/leak-probe.js';

const ATTEMPT_MS = 3000;

/**
 * Point 3 of the hardening issue: v2ray parses every byte the workspace sends and runs in the egress gateway's
 * namespace with NET_ADMIN, where the gateway's kill switch also lives. Whatever took v2ray over could flush
 * that ruleset, forward the workspace straight out, send on its own, or speak on the uplink bridge as another
 * gateway. Played here as root in that namespace, on a host started by a real gateway process; the host's guard
 * on the gateway's uplink port is what must still hold: nothing reaches the lab's internet, only the upstream
 * answers, and only to the gateway's own address.
 */
describe('attack: an egress gateway taken over from inside', {
  skip: needs('lab', 'docker'),
  timeout: 600_000,
}, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-takeover-'));
  const docker = new Docker({ socketPath: '/var/run/docker.sock' });
  const hostIds: string[] = [];
  let lab: LabDescription;
  let gateway: GatewayProcess;
  let hostId: string;

  before(async () => {
    [, lab] = await Promise.all([buildTestImages(), ensureLab()]);
    const started = await startLabGatewayProcessWithHost(lab, work, 'takeover');
    ({ gateway, hostId } = started);
    hostIds.push(hostId);
    const start = await api(started.url, started.token, 'POST', `/v1/admin/hosts/${hostId}/start`);
    assert.equal(start.status, 202, JSON.stringify(start.body));
    const task = await waitForTask(started.url, started.token, start.body.task_id);
    assert.equal(task.status, 'succeeded', JSON.stringify(task));
  });

  after(async () => {
    await gateway?.kill('SIGTERM');
    await removeHostResources(hostIds);
    rmSync(work, { recursive: true, force: true });
  });

  it('with its ruleset flushed, forwarding on and a neighbour address taken, nothing leaves but to the upstream', async () => {
    const info = await docker.getContainer(`ccp-egress-${hostId}`).inspect();
    const own = {
      name: info.Name.slice(1),
      pid: info.State.Pid,
      uplinkAddress: info.NetworkSettings.Networks[UPLINK_NETWORK]!.IPAddress,
    };
    const workspace = await docker.getContainer(`ccp-ws-${hostId}`).inspect();
    const linuxUser = (workspace.Config.Env ?? [])
      .find((entry) => entry.startsWith('WORKSPACE_USER='))
      ?.slice('WORKSPACE_USER='.length);
    assert.ok(linuxUser, 'the workspace names its user');
    const { upstream } = JSON.parse(
      readFileSync(path.join(work, 'takeover', 'runtime', 'egress', hostId, 'uplink.json'), 'utf8'),
    ) as UplinkPolicy;
    const inet = lab.internet.address;

    const { spoofed } = await takeOverGateway(own);
    await resetSourceCountersWhenQuiet();
    const [fromWorkspace, fromGateway] = await Promise.all([
      probeInWorkspace(`ccp-ws-${hostId}`, linuxUser, 'root', [
        { id: 'tcp', kind: 'http', host: inet, port: 80, path: '/ip', timeoutMs: ATTEMPT_MS },
      ]),
      probeInNetns(own.pid, [
        { id: 'tcp', kind: 'http', host: inet, port: 80, path: '/ip', timeoutMs: ATTEMPT_MS },
        {
          id: 'spoofed/upstream',
          kind: 'connect',
          source: spoofed,
          host: upstream.address,
          port: upstream.port,
          timeoutMs: ATTEMPT_MS,
        },
        { id: 'spoofed/tcp', kind: 'connect', source: spoofed, host: inet, port: 80, timeoutMs: ATTEMPT_MS },
      ]),
    ]);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const reached = await readSourceCounters();

    assert.equal(
      fromWorkspace.get('tcp')?.ok,
      false,
      `the workspace, forwarded: ${JSON.stringify(fromWorkspace.get('tcp'))}`,
    );
    for (const id of ['tcp', 'spoofed/upstream', 'spoofed/tcp'])
      assert.equal(
        fromGateway.get(id)?.ok,
        false,
        `the gateway, ${id}: ${JSON.stringify(fromGateway.get(id))}`,
      );
    assert.deepEqual(reached, [], "nothing may reach the lab's internet");

    // The guard is not a wall around everything: the gateway's own address still reaches its upstream.
    const still = await probeInNetns(own.pid, [
      { id: 'upstream', kind: 'connect', host: upstream.address, port: upstream.port, timeoutMs: ATTEMPT_MS },
    ]);
    assert.equal(still.get('upstream')?.ok, true, JSON.stringify(still.get('upstream')));
  });
});
