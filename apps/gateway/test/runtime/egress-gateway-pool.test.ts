import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import type { ProxyConfig } from '@ccp/api';
import Docker from 'dockerode';
import { ensureLab, type LabDescription, type VariantName, variant } from '../../../../test/lab/lab.js';
import { removeDataDir } from '../../../../test/support/data-dir.js';
import { needs } from '../../../../test/support/needs.js';
import { v2rayEngine } from '../../src/egress/v2ray-engine.js';
import { OWNER_LABEL, POOL_LABEL } from '../../src/runtime/container-specs.js';
import { DockerWorkspaceRuntime, gatewayInstanceId } from '../../src/runtime/docker-workspace-runtime.js';
import { IMAGE_ROOT } from '../../src/runtime/image-inputs.js';
import type { TimingSpan } from '../../src/runtime/start-timings.js';
import { RuntimeError, type UpstreamSpec, type WorkspaceSpec } from '../../src/runtime/workspace-runtime.js';
import { buildTestImages, labEgressSettings } from '../helpers/lab-egress.js';
import { KeyFactory } from '../helpers/ssh-keygen.js';

const exec = promisify(execFile);
const docker = new Docker({ socketPath: '/var/run/docker.sock' });
const run = `p${randomBytes(3).toString('hex')}`;
const ids = { first: `${run}-a`, second: `${run}-b`, sabotaged: `${run}-c`, changed: `${run}-d` };
const noProgress = async () => {};

async function eventually<T>(what: string, attempt: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = await attempt();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('egress gateways started ahead (real Docker, egress lab)', {
  skip: needs('lab', 'docker'),
  timeout: 600_000,
}, () => {
  let lab: LabDescription;
  let images: { workspace: string; egressGateway: string };
  let dataDir: string;
  let runtime: DockerWorkspaceRuntime;
  let owner: string;
  let stopWatching = () => {};
  const keys = new KeyFactory();
  const key = keys.generate('ed25519');
  /** The spans of each start, as the runtime logs them at debug level. */
  const starts: TimingSpan[][] = [];
  const spec = (hostId: string): WorkspaceSpec => ({
    hostId,
    shortId: hostId.slice(-6),
    linuxUser: 'alice',
    authorizedKey: key.publicKey,
    desktopPassword: 'desk-pw1',
    limits: { memoryMb: 512, cpus: 1, pids: 256, homeMb: 1024 },
  });
  const upstream = (name: VariantName, exitIndex = 0): UpstreamSpec => {
    const chosen = variant(lab, name, exitIndex);
    return {
      egressIpId: `egress-${run}`,
      label: `${name} via ${chosen.exit.name}`,
      exitIp: chosen.exit.address,
      config: chosen.proxyConfig as ProxyConfig,
    };
  };
  const makeRuntime = () =>
    new DockerWorkspaceRuntime({
      docker,
      engine: v2rayEngine,
      images,
      dataDir,
      egress: labEgressSettings(lab),
      egressPool: { perUpstream: 1, max: 4 },
      log: {
        debug: (fields, message) => {
          if (message.startsWith('host start')) starts.push((fields as { spans: TimingSpan[] }).spans);
        },
      },
    });
  /** This gateway's pooled gateways no host took yet, by container id. */
  const pooled = async () =>
    (
      await docker.listContainers({
        all: true,
        filters: { label: [POOL_LABEL, `${OWNER_LABEL}=${owner}`] },
      })
    )
      .filter((container) => container.Names.some((name) => name.startsWith('/ccp-pool-')))
      .map((container) => container.Id);
  /**
   * The guard tables of every pooled gateway this suite saw ready. Other suites' gateways, running meanwhile,
   * have pools of their own, so a check for tables left behind names these, not every `ccp_uplink_pool-`.
   */
  const poolGuards = new Set<string>();
  const tableNamed = (table: string) => new RegExp(`^table netdev ${table}$`, 'm');
  /** The one pooled gateway (besides those given) once it is ready: guarded on its uplink, the last step. */
  const onePooled = (besides: string[] = []) =>
    eventually('a gateway started ahead', async () => {
      const found = (await pooled()).filter((id) => !besides.includes(id));
      if (found.length !== 1) return undefined;
      const info = await docker
        .getContainer(found[0]!)
        .inspect()
        .catch(() => null);
      if (!info) return undefined;
      const guard = `ccp_uplink_${info.Name.replace('/ccp-pool-', '')}`;
      if (!tableNamed(guard).test(await uplinkTables())) return undefined;
      poolGuards.add(guard);
      return found[0];
    });
  const gatewayOf = async (hostId: string) => docker.getContainer(`ccp-egress-${hostId}`).inspect();
  const exitSeen = async (hostId: string) => {
    const { stdout } = await exec(
      'docker',
      [
        'exec',
        '--user',
        'alice',
        `ccp-ws-${hostId}`,
        'curl',
        '-sS',
        '--max-time',
        '5',
        `${lab.internet.httpUrl}/ip`,
      ],
      { timeout: 30_000 },
    );
    return stdout.trim();
  };
  const uplinkTables = async () => {
    const { stdout } = await exec('nft', ['list', 'tables', 'netdev']);
    return stdout;
  };
  const spanNames = (spans: TimingSpan[]) => spans.map((span) => span.name);

  before(async () => {
    await exec('bash', [path.join(IMAGE_ROOT, '..', 'scripts', 'docker.sh'), 'ensure']);
    [images, lab] = await Promise.all([buildTestImages(), ensureLab()]);
    dataDir = await mkdtemp(path.join(tmpdir(), 'ccp-pool-'));
    owner = gatewayInstanceId(path.join(dataDir, 'runtime'));
    runtime = makeRuntime();
    stopWatching = runtime.watch((error) => console.error('watch:', error));
  });

  after(async () => {
    stopWatching();
    for (const hostId of Object.values(ids)) await runtime?.remove(hostId).catch(() => undefined);
    await runtime?.retireEgressGateways().catch(() => undefined);
    if (dataDir) await removeDataDir(dataDir);
    keys.cleanup();
  });

  let firstPooled: string;

  it('starts one gateway ahead for an upstream once a host started with it', async () => {
    await runtime.start(spec(ids.first), upstream('vmess-tcp'), noProgress);
    assert.ok(spanNames(starts.at(-1)!).includes('gateway: create'), 'nothing was pooled yet');
    firstPooled = await onePooled();
    const info = await docker.getContainer(firstPooled).inspect();
    assert.equal(info.Config.Labels[POOL_LABEL], `egress-${run}`);
    assert.equal(info.HostConfig.RestartPolicy?.Name, 'no');
    // Guarded on its uplink port while it waits, like any gateway (onePooled waited for that guard).
    assert.equal(poolGuards.size, 1);
  });

  it('gives the next start with that upstream the pooled gateway, verified as always, and starts another', async () => {
    const started = await runtime.start(spec(ids.second), upstream('vmess-tcp'), noProgress);
    const names = spanNames(starts.at(-1)!);
    assert.ok(names.includes('gateway: take a pooled one'), names.join(', '));
    assert.ok(!names.includes('gateway: create'), names.join(', '));
    // Nothing less verified: the path check and the check as the user ran.
    assert.ok(names.includes('path check') && names.includes('user check'), names.join(', '));
    assert.deepEqual(started.echoesOut, []);
    const gateway = await gatewayOf(ids.second);
    assert.equal(gateway.Id, firstPooled, 'the host runs on the pooled gateway');
    assert.equal(gateway.HostConfig.RestartPolicy?.Name, 'unless-stopped');
    assert.equal(await runtime.state(ids.second), 'running');
    assert.equal(await exitSeen(ids.second), lab.exits[0]!.address);
    // Its guard is the host's now; the pool's goes after the start.
    assert.match(await uplinkTables(), tableNamed(`ccp_uplink_${ids.second}`));
    const poolId = gateway.Mounts.find((mount) => mount.Destination === '/etc/ccp-egress')!
      .Source.split('/')
      .pop();
    await eventually("the pool's guard to go", async () =>
      tableNamed(`ccp_uplink_${poolId}`).test(await uplinkTables()) ? undefined : true,
    );
    // Refilled in the background.
    await onePooled([firstPooled]);
  });

  it('links a taken gateway again when Docker restarts it', async () => {
    await docker.getContainer(`ccp-egress-${ids.second}`).restart({ t: 1 });
    await eventually('the host to be linked again', async () =>
      (await runtime.state(ids.second)) === 'running' ? true : undefined,
    );
    assert.equal(await exitSeen(ids.second), lab.exits[0]!.address);
  });

  it('still catches a direct path through a pooled gateway that was tampered with', async () => {
    const target = await onePooled([firstPooled]);
    const pid = (await docker.getContainer(target).inspect()).State.Pid;
    // Forwarding on and masquerading, the kill switch emptied: what the path check must find.
    const netns = ['nsenter', `--net=/proc/${pid}/ns/net`, '--'];
    const loaded = spawnSync(netns[0]!, [...netns.slice(1), 'nft', '-f', '-'], {
      input: [
        'flush ruleset',
        'table inet ccp_egress {}',
        'table ip sabotage {',
        '  chain post { type nat hook postrouting priority srcnat; oifname "eth0" masquerade; }',
        '}',
        '',
      ].join('\n'),
      encoding: 'utf8',
    });
    assert.equal(loaded.status, 0, loaded.stderr);
    await exec(netns[0]!, [...netns.slice(1), 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
    await assert.rejects(
      runtime.start(spec(ids.sabotaged), upstream('vmess-tcp'), noProgress),
      (error: unknown) => error instanceof RuntimeError && error.code === 'direct_path_open',
    );
    assert.ok(spanNames(starts.at(-1)!).includes('gateway: take a pooled one'));
    assert.equal(await runtime.state(ids.sabotaged), 'stopped');
  });

  it('never gives a gateway made for what an upstream was before, and retires those of a changed one', async () => {
    const old = await onePooled();
    // The same egress IP, another config: the pooled gateway no longer fits.
    await runtime.start(spec(ids.changed), upstream('socks'), noProgress);
    assert.ok(spanNames(starts.at(-1)!).includes('gateway: create'));
    assert.equal(await exitSeen(ids.changed), lab.exits[0]!.address);
    await eventually('the old pooled gateway to go', async () =>
      (await pooled()).includes(old) ? undefined : true,
    );
    const fresh = await onePooled();
    assert.equal((await docker.getContainer(fresh).inspect()).Config.Labels[POOL_LABEL], `egress-${run}`);
    // An egress IP changed or deleted: the gateway retires them.
    await runtime.retireEgressGateways(`egress-${run}`);
    assert.deepEqual(await pooled(), []);
  });

  it('removes what an earlier process left in the pool at start-up, and leaves the hosts alone', async () => {
    await runtime.start(spec(ids.first), upstream('vmess-tcp'), noProgress);
    // Ready before this process "ends": the next one finds it as a crash would leave it.
    const left = await onePooled();
    stopWatching();
    runtime = makeRuntime();
    stopWatching = runtime.watch((error) => console.error('watch:', error));
    await runtime.retireEgressGateways();
    assert.deepEqual(await pooled(), []);
    await assert.rejects(
      docker.getContainer(left).inspect(),
      (error: { statusCode?: number }) => error.statusCode === 404,
    );
    // No guard of a pooled gateway this suite saw is left: taken, replaced, retired or found at start-up.
    const tables = await uplinkTables();
    assert.deepEqual(
      [...poolGuards].filter((guard) => tableNamed(guard).test(tables)),
      [],
      tables,
    );
    assert.ok(poolGuards.size >= 3, [...poolGuards].join(', '));
    // Only the links of the gateways hosts took are left in the pool's directory.
    const poolDir = path.join(dataDir, 'runtime', 'egress-pool');
    const takenDir = async (hostId: string) =>
      path.basename(
        (await gatewayOf(hostId)).Mounts.find((mount) => mount.Destination === '/etc/ccp-egress')!.Source,
      );
    const secondDir = await takenDir(ids.second);
    const sabotagedDir = await takenDir(ids.sabotaged);
    assert.deepEqual((await readdir(poolDir)).sort(), [secondDir, sabotagedDir].sort());
    assert.equal(await runtime.state(ids.second), 'running');
    assert.equal(await exitSeen(ids.second), lab.exits[0]!.address);
    await runtime.remove(ids.second);
    assert.deepEqual(await readdir(poolDir), [sabotagedDir], "the removed host's link went with it");
    await assert.rejects(gatewayOf(ids.second), (error: { statusCode?: number }) => error.statusCode === 404);
  });
});
