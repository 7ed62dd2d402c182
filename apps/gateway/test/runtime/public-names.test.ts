/**
 * Workspaces of a gateway with no probe of its own: each of the six protocols starts a real workspace whose path
 * is verified through the lab's stand-ins for the public endpoints (set only through the settings an operator
 * would use), then resolves and fetches names outside the probe's zone from inside, and nothing but the exit
 * reaches the lab's internet meanwhile.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import type { ProxyConfig } from '@ccp/api';
import Docker from 'dockerode';
import {
  ensureLab,
  type LabDescription,
  readResolverLog,
  readSourceCounters,
  resetSourceCountersWhenQuiet,
  type VariantName,
  variant,
} from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { v2rayEngine } from '../../src/egress/v2ray-engine.js';
import { HOST_LABEL } from '../../src/runtime/container-specs.js';
import { DockerWorkspaceRuntime } from '../../src/runtime/docker-workspace-runtime.js';
import { buildTestImages, labPublicEgressSettings } from '../helpers/lab-egress.js';
import { KeyFactory } from '../helpers/ssh-keygen.js';

const exec = promisify(execFile);
const skip = needs('lab', 'docker');
const docker = new Docker({ socketPath: '/var/run/docker.sock' });
const run = `pub${randomBytes(3).toString('hex')}`;

/** One variant of each protocol, alternating exits so each host has its own exit address. */
const VARIANTS: readonly [VariantName, number][] = [
  ['socks-auth', 0],
  ['http-auth-tls', 1],
  ['ss-chacha20-ietf-poly1305', 0],
  ['vmess-ws', 1],
  ['vless-ws-tls', 0],
  ['trojan-tls', 1],
];

async function inWorkspace(
  hostId: string,
  script: string,
  env: Record<string, string> = {},
): Promise<string> {
  const flags = Object.entries(env).flatMap(([name, value]) => ['-e', `${name}=${value}`]);
  const { stdout } = await exec(
    'docker',
    ['exec', '-u', 'alice', ...flags, `ccp-ws-${hostId}`, 'sh', '-c', script],
    { timeout: 60_000 },
  );
  return stdout;
}

describe('workspaces resolve and fetch public names, verified without a probe', {
  skip,
  timeout: 600_000,
}, () => {
  let lab: LabDescription;
  let runtime: DockerWorkspaceRuntime;
  let dataDir: string;
  let caPem: string;
  const keys = new KeyFactory();

  before(async () => {
    const [images, ready] = await Promise.all([buildTestImages(), ensureLab()]);
    lab = ready;
    caPem = await readFile(lab.caCert, 'utf8');
    dataDir = await mkdtemp(path.join(tmpdir(), 'ccp-public-'));
    const egress = labPublicEgressSettings(lab);
    assert.equal(egress.probe, null, 'no probe of its own');
    runtime = new DockerWorkspaceRuntime({ docker, engine: v2rayEngine, images, dataDir, egress });
  });

  after(async () => {
    for (const [name] of VARIANTS) await runtime?.remove(`${run}-${name}`).catch(() => undefined);
    for (const container of await docker.listContainers({ all: true, filters: { label: [HOST_LABEL] } })) {
      if (container.Labels[HOST_LABEL]?.startsWith(`${run}-`))
        await docker
          .getContainer(container.Id)
          .remove({ force: true, v: true })
          .catch(() => undefined);
    }
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
    keys.cleanup();
  });

  for (const [name, exitIndex] of VARIANTS) {
    it(`${name}: the start verifies through the public stand-ins; public names resolve and load; only the exit is seen`, async (t) => {
      if (!lab.public) return t.skip('the running lab has no public stand-ins (lab.sh up builds them)');
      const chosen = variant(lab, name, exitIndex);
      const exitIp = chosen.exit.address;
      const hostId = `${run}-${name}`;
      await resetSourceCountersWhenQuiet();
      await runtime.start(
        {
          hostId,
          shortId: hostId.slice(-6),
          linuxUser: 'alice',
          authorizedKey: keys.generate('ed25519').publicKey,
          desktopPassword: 'desk-pw1',
          limits: { memoryMb: 512, cpus: 1, pids: 256, homeMb: 1024 },
        },
        { egressIpId: `egress-${name}`, label: name, exitIp, config: chosen.proxyConfig as ProxyConfig },
        async () => {},
      );

      const { web, checkip } = lab.public;
      const resolved = await inWorkspace(hostId, `getent ahostsv4 ${web.name} | awk '{ print $1; exit }'`);
      assert.equal(resolved.trim(), web.address, `${web.name} resolves inside the workspace`);
      const checkipResolved = await inWorkspace(
        hostId,
        `getent ahostsv4 ${checkip.name} | awk '{ print $1; exit }'`,
      );
      assert.equal(checkipResolved.trim(), checkip.address);

      const seenOverHttp = await inWorkspace(hostId, `curl -fsS --max-time 20 http://${web.name}/ip`);
      assert.equal(seenOverHttp.trim(), exitIp, 'the site sees the exit');
      const page = await inWorkspace(
        hostId,
        `printf '%s' "$CA" > /tmp/lab-ca.pem && curl -fsS --max-time 20 --cacert /tmp/lab-ca.pem https://${web.name}/`,
        { CA: caPem },
      );
      assert.match(page, /ccp-lab public web/);

      const strangers = (await readSourceCounters()).filter((counter) => counter.address !== exitIp);
      assert.deepEqual(strangers, [], `only ${exitIp} reached the lab's internet`);
      const askers = new Set((await readResolverLog(lab, web.name)).map((entry) => entry.address));
      const exits = new Set(lab.exits.map((exit) => exit.address));
      assert.ok(askers.has(exitIp), `the resolver saw ${web.name} asked from ${exitIp}`);
      for (const asker of askers) assert.ok(exits.has(asker), `${web.name} asked from ${asker}, not an exit`);

      await runtime.remove(hostId);
    });
  }
});
