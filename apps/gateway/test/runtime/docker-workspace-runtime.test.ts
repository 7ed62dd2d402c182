import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import type { ProxyConfig } from '@ccp/api';
import Docker from 'dockerode';
import { Client } from 'ssh2';
import {
  ensureLab,
  type LabDescription,
  readDnsLog,
  type VariantName,
  variant,
} from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { verificationPlan } from '../../src/egress/egress-verification.js';
import { renderGatewayFirewall } from '../../src/egress/gateway-firewall.js';
import { v2rayEngine } from '../../src/egress/v2ray-engine.js';
import { execCapped } from '../../src/runtime/container-exec.js';
import { HOST_LABEL, WORKSPACE_UID } from '../../src/runtime/container-specs.js';
import { DockerWorkspaceRuntime } from '../../src/runtime/docker-workspace-runtime.js';
import { relayEnvironment, renderEgressGatewayFiles } from '../../src/runtime/egress-gateway-files.js';
import { IMAGE_ROOT } from '../../src/runtime/image-inputs.js';
import { listensOnTcp } from '../../src/runtime/netns.js';
import { verifyEgressPath } from '../../src/runtime/path-check.js';
import type { TimingSpan } from '../../src/runtime/start-timings.js';
import { verifyAsWorkspaceUser } from '../../src/runtime/user-path-check.js';
import {
  RuntimeError,
  type UpstreamSpec,
  UpstreamSwitchReverted,
  type WorkspaceEndpoints,
  type WorkspaceSpec,
} from '../../src/runtime/workspace-runtime.js';
import { buildTestImages, labEgressSettings } from '../helpers/lab-egress.js';
import { KeyFactory } from '../helpers/ssh-keygen.js';
import { execAndEnd } from '../helpers/ssh2-exec.js';

const exec = promisify(execFile);

const hasTool = (tool: string, ...args: string[]) => spawnSync(tool, args).error === undefined;

describe('egress gateway files', () => {
  const upstream = {
    config: { type: 'socks', server: '198.51.100.21', server_port: 1080, version: '5' } as ProxyConfig,
    serverIp: '198.51.100.21',
  };
  const files = renderEgressGatewayFiles({
    engine: v2rayEngine,
    upstream,
    dns: { dohUrl: 'https://203.0.113.10/dns-query', tcpResolver: { address: '203.0.113.10', port: 53 } },
    relaySource: '172.18.0.1',
  });

  it('admits the relay ports from the control plane only, and only their replies leave', () => {
    assert.match(files.ruleset, /iifname "eth0" ip saddr 172\.18\.0\.1 tcp dport \{ 22, 6080 \} accept/);
    assert.match(
      files.ruleset,
      /oifname "eth0" ip daddr 172\.18\.0\.1 tcp sport \{ 22, 6080 \} ct state established accept/,
    );
    assert.match(
      files.ruleset,
      /chain forward \{\n\s+type filter hook forward priority filter; policy drop;\n\s+\}/,
    );
  });

  it('leaves the relay out of the tunnel, so restarting v2ray never cuts a session', () => {
    const config = JSON.parse(files.v2ray) as { inbounds: { port: number }[] };
    assert.ok(config.inbounds.every((inbound) => inbound.port !== 22 && inbound.port !== 6080));
    assert.deepEqual(relayEnvironment(), [
      'EGRESS_RELAY_PORTS=22 6080',
      'EGRESS_RELAY_TARGET=169.254.77.2',
      'EGRESS_RELAY_MAX_CONNECTIONS=128',
    ]);
  });

  it('rejects a relay source that is not an IPv4 literal', () => {
    assert.throws(
      () =>
        renderGatewayFirewall({
          table: 't',
          workspaceInterface: 'ccp-ws',
          uplinkInterface: 'eth0',
          upstream: { address: '198.51.100.21', port: 1080, protocols: ['tcp'] },
          socketMark: 0xff,
          tproxyMark: 1,
          transparentPort: 12345,
          dnsPort: 53,
          relay: { source: 'gateway.example', ports: [22] },
        }),
      TypeError,
    );
  });

  it('nftables and v2ray accept them', { skip: needs('nft') }, () => {
    const nft = spawnSync('nft', ['-c', '-f', '/dev/stdin'], { input: files.ruleset, encoding: 'utf8' });
    assert.equal(nft.status, 0, nft.stderr);
    if (!hasTool('v2ray', '-version')) return;
    const v2ray = spawnSync('v2ray', ['-test', '-config', 'stdin:'], {
      input: files.v2ray,
      encoding: 'utf8',
    });
    assert.equal(v2ray.status, 0, v2ray.stdout + v2ray.stderr);
  });
});

// -------------------------------------------------------------------------------------------- real Docker

const skip = needs('lab', 'docker');
const docker = new Docker({ socketPath: '/var/run/docker.sock' });
const run = `t${randomBytes(3).toString('hex')}`;
const ids = {
  main: `${run}-main`,
  wrong: `${run}-wrong`,
  cancel: `${run}-cancel`,
  ahead: `${run}-ahead`,
  takeover: `${run}-takeover`,
  atCreation: `${run}-at-creation`,
};
const noProgress = async () => {};

/** `docker exec` in a host's container (the test may use the CLI; the runtime never does). */
async function execIn(
  container: string,
  command: string[],
  user?: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const args = ['exec', ...(user ? ['--user', user] : []), container, ...command];
  try {
    const { stdout, stderr } = await exec('docker', args, { timeout: 30_000 });
    return { code: 0, stdout: stdout.trim(), stderr };
  } catch (error) {
    const failure = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failure.code ?? -1, stdout: (failure.stdout ?? '').trim(), stderr: failure.stderr ?? '' };
  }
}

async function eventually<T>(what: string, attempt: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = await attempt();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function labelled(hostId: string) {
  const filters = { label: [`${HOST_LABEL}=${hostId}`] };
  const containers = await docker.listContainers({ all: true, filters });
  const { Volumes } = await docker.listVolumes({ filters });
  return { containers, volumes: Volumes ?? [] };
}

describe('DockerWorkspaceRuntime (real Docker, egress lab)', { skip, timeout: 600_000 }, () => {
  let lab: LabDescription;
  let runtime: DockerWorkspaceRuntime;
  let dataDir: string;
  let stopWatching = () => {};
  const keys = new KeyFactory();
  const key = keys.generate('ed25519');
  const spec = (hostId: string): WorkspaceSpec => ({
    hostId,
    shortId: hostId.slice(-6),
    linuxUser: 'alice',
    authorizedKey: key.publicKey,
    desktopPassword: 'desk-pw1',
    limits: { memoryMb: 512, cpus: 1, pids: 256, homeMb: 1024 },
  });
  const upstream = (name: VariantName, exitIndex = 0, exitIp?: string): UpstreamSpec => {
    const chosen = variant(lab, name, exitIndex);
    return {
      egressIpId: `egress-${name}-${exitIndex}`,
      label: `${name} via ${chosen.exit.name}`,
      exitIp: exitIp ?? chosen.exit.address,
      config: chosen.proxyConfig as ProxyConfig,
    };
  };
  const workspace = (hostId: string) => `ccp-ws-${hostId}`;
  const gateway = (hostId: string) => `ccp-egress-${hostId}`;
  const asUser = (hostId: string, ...command: string[]) => execIn(workspace(hostId), command, 'alice');
  const exitSeen = async (hostId: string, timeout = 5) =>
    (await asUser(hostId, 'curl', '-sS', '--max-time', String(timeout), `${lab.internet.httpUrl}/ip`)).stdout;

  let endpoints: WorkspaceEndpoints;
  let images: { workspace: string; egressGateway: string };
  /** The timing spans of every start, as the runtime logs them at debug level. */
  const startLogs: { message: string; spans: TimingSpan[] }[] = [];

  before(async () => {
    await exec('bash', [path.join(IMAGE_ROOT, '..', 'scripts', 'docker.sh'), 'ensure']);
    const [built, ready] = await Promise.all([buildTestImages(), ensureLab()]);
    images = built;
    lab = ready;
    dataDir = await mkdtemp(path.join(tmpdir(), 'ccp-runtime-'));
    runtime = new DockerWorkspaceRuntime({
      docker,
      engine: v2rayEngine,
      images,
      dataDir,
      egress: labEgressSettings(lab),
      log: {
        debug: (fields, message) =>
          startLogs.push({ message, spans: (fields as { spans: TimingSpan[] }).spans }),
      },
    });
    stopWatching = runtime.watch((error) => console.error('watch:', error));
  });

  after(async () => {
    stopWatching();
    for (const hostId of Object.values(ids)) await runtime?.remove(hostId).catch(() => undefined);
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
    keys.cleanup();
  });

  it('starts through vmess: the workspace leaves from the exit, resolving through the tunnel', async () => {
    const stages: string[] = [];
    const began = Date.now();
    const { echoesOut, ...answering } = await runtime.start(
      spec(ids.main),
      upstream('vmess-tcp'),
      async (_progress, stage) => {
        stages.push(stage);
      },
    );
    endpoints = answering;
    console.log(`start took ${Date.now() - began} ms`);
    assert.ok(stages.some((stage) => stage.startsWith('verifying the path')));
    // Every IP echo of the lab answered while the path was verified.
    assert.deepEqual(echoesOut, []);
    assert.equal(endpoints.ssh.port, 22);
    assert.equal(await runtime.state(ids.main), 'running');
    assert.deepEqual(await runtime.endpoints(ids.main), endpoints);
    assert.ok((await runtime.hostIds()).includes(ids.main));

    assert.equal(await exitSeen(ids.main), lab.exits[0]!.address);
    const name = `${randomBytes(8).toString('hex')}.leak.${lab.internet.zone}`;
    const resolved = await asUser(ids.main, 'getent', 'ahostsv4', name);
    assert.equal(resolved.code, 0, resolved.stderr);
    assert.match(resolved.stdout, new RegExp(`^${lab.internet.answerAddress.replaceAll('.', '\\.')}\\s`));
    const seen = new Set((await readDnsLog(lab, name)).map((entry) => entry.address));
    assert.deepEqual([...seen], [lab.exits[0]!.address]);
  });

  it('logs where the start went, and links and checks only once the egress gateway is ready and guarded', () => {
    const logged = startLogs.find((entry) => entry.message === 'host started');
    assert.ok(logged, `no start logged: ${JSON.stringify(startLogs)}`);
    const span = (name: string) => {
      const found = logged.spans.find((entry) => entry.name === name);
      assert.ok(found, `no span ${name} in ${logged.spans.map((entry) => entry.name).join(', ')}`);
      // Each figure is rounded to 0.1 ms, so one that ends as the next begins may seem to end 0.1 ms after it.
      return { began: found.atMs, ended: found.atMs + found.ms - 0.1 };
    };
    const link = span('link');
    // Side by side where allowed: the workspace starts beside its gateway, the program waits for its task.
    assert.ok(span('workspace: start').began < span('gateway: kill switch and v2ray ready').ended);
    assert.ok(span('path check: program in the workspace').began >= link.ended);
    // The path check's program started in the workspace's namespace before Docker's start returned.
    assert.ok(span('workspace: namespace seen').ended < span('workspace: start').ended - 1);
    // Never before the gateway's kill switch, v2ray and the host's guard on its uplink are in place.
    assert.ok(link.began >= span('gateway: kill switch and v2ray ready').ended);
    assert.ok(link.began >= span('gateway: uplink guard').ended);
    assert.ok(span('path check').began >= link.ended);
    // The check as the user runs beside the path check (by uid: it need not wait for the entrypoint or sshd).
    assert.ok(span('user check').began >= link.ended);
  });

  it('names localhost and the workspace itself from /etc/hosts for its user, as Docker no longer writes one', async () => {
    const own = (await asUser(ids.main, 'uname', '-n')).stdout.trim();
    assert.match(own, /^ccp-[a-z0-9-]+$/);
    for (const [name, address] of [
      ['localhost', '127.0.0.1'],
      [own, '127.0.1.1'],
    ] as const) {
      const found = await asUser(ids.main, 'getent', 'ahostsv4', name);
      assert.equal(found.code, 0, `${name}: ${found.stderr}`);
      assert.match(found.stdout, new RegExp(`^${address.replaceAll('.', '\\.')}\\s`), name);
    }
    // sudo looks the workspace's own name up, and says so on every call when it cannot.
    const sudo = await asUser(ids.main, 'sudo', '-n', 'true');
    assert.equal(sudo.code, 0);
    assert.equal(sudo.stderr, '');
  });

  it('gives the workspace no way to touch its network, not even as root', async () => {
    assert.equal((await asUser(ids.main, 'sudo', '-n', 'true')).code, 0, 'sudo works');
    for (const command of [
      ['ip', 'addr', 'add', '192.0.2.99/24', 'dev', 'eth0'],
      ['ip', 'route', 'replace', 'default', 'via', '169.254.77.2'],
      ['ip', 'link', 'set', 'lo', 'down'],
    ]) {
      const result = await asUser(ids.main, 'sudo', '-n', ...command);
      assert.notEqual(result.code, 0, `${command.join(' ')} must fail`);
      assert.match(result.stderr, /Operation not permitted/);
    }
    const status = await execIn(workspace(ids.main), ['grep', '^CapBnd:', '/proc/1/status']);
    const bounding = BigInt(`0x${status.stdout.split(/\s+/)[1]}`);
    for (const [capability, bit] of Object.entries({ NET_ADMIN: 12n, NET_RAW: 13n, SYS_ADMIN: 21n }))
      assert.equal((bounding >> bit) & 1n, 0n, `${capability} is in the bounding set`);
    const ipv6 = await execIn(workspace(ids.main), ['cat', '/proc/sys/net/ipv6/conf/all/disable_ipv6']);
    assert.equal(ipv6.stdout, '1');
    const resolv = await execIn(workspace(ids.main), ['cat', '/etc/resolv.conf']);
    assert.match(resolv.stdout, /^nameserver 169\.254\.77\.1$/m);
  });

  it("checks as the user's uid and group what the user gets: a resolver file only root reads fails the start's check", async () => {
    // What the start runs beside the path check (by number, before the entrypoint has named the user).
    const check = () =>
      verifyAsWorkspaceUser(
        (command, timeoutMs, as) => execCapped(docker, workspace(ids.main), command, timeoutMs, as),
        { name: 'alice', execAs: `${WORKSPACE_UID}:${WORKSPACE_UID}` },
        verificationPlan(labEgressSettings(lab)),
        lab.exits[0]!.address,
        5000,
      );
    await check();
    // As a machine's umask 077 once left it (the first hour's failure): the file Docker binds, made 0600.
    const resolvConf = (await docker.getContainer(workspace(ids.main)).inspect()).ResolvConfPath;
    const { mode } = await stat(resolvConf);
    await chmod(resolvConf, 0o600);
    try {
      await assert.rejects(
        check(),
        (error: unknown) =>
          error instanceof RuntimeError &&
          error.code === 'dns_failed' &&
          /user alice cannot resolve .*Permission denied/.test(error.message),
      );
    } finally {
      await chmod(resolvConf, mode);
    }
  });

  it('lets the control plane log in over SSH through the relay', async () => {
    const { user, hostKey } = await sshLogin(endpoints, key.privateKey);
    assert.equal(user, 'alice');
    const stored = await execIn(workspace(ids.main), ['cat', '/etc/ssh/hostkeys/ssh_host_ed25519_key.pub']);
    assert.equal(hostKey, stored.stdout.split(/\s+/)[1]);
  });

  it('blocks traffic while v2ray is dead and recovers when its supervisor restarts it', async () => {
    const killed = await execIn(gateway(ids.main), [
      'sh',
      '-c',
      'kill -KILL "$(cat /run/ccp-egress/v2ray.pid)"',
    ]);
    assert.equal(killed.code, 0, killed.stderr);
    const during = await asUser(ids.main, 'curl', '-sS', '--max-time', '1', `${lab.internet.httpUrl}/ip`);
    assert.notEqual(during.code, 0, `traffic got out without v2ray: ${during.stdout}`);
    await eventually('v2ray to come back', async () =>
      (await exitSeen(ids.main, 1)) === lab.exits[0]!.address ? true : undefined,
    );
  });

  it('starts a relay listener again when it dies, and logins through it work again', async () => {
    const pidOf = async () =>
      (await execIn(gateway(ids.main), ['cat', '/run/ccp-egress/relay-22.pid'])).stdout || undefined;
    const first = await eventually('the relay listener of port 22', pidOf);
    const killed = await execIn(gateway(ids.main), ['kill', '-KILL', first]);
    assert.equal(killed.code, 0, killed.stderr);
    await eventually('the relay listener to be started again', async () => {
      const pid = await pidOf();
      return pid && pid !== first ? pid : undefined;
    });
    // Its pid is written when it is started; it answers once it listens, a moment later.
    const gatewayPid = (await docker.getContainer(gateway(ids.main)).inspect()).State.Pid;
    await eventually('the new relay listener to listen', async () =>
      (await listensOnTcp(gatewayPid, 22)) ? true : undefined,
    );
    assert.equal((await sshLogin(endpoints, key.privateKey)).user, 'alice');
    // The shell supervises the listeners itself: no process besides them, v2ray, the DNS filter and tini.
    const processes = await execIn(gateway(ids.main), ['ps', '-e', '-o', 'comm=']);
    assert.deepEqual(processes.stdout.split('\n').sort(), [
      'ccp-egress-entr',
      'docker-init',
      'perl',
      'ps',
      'socat',
      'socat',
      'v2ray',
    ]);
  });

  it('switches to another protocol and exit in place', async () => {
    await runtime.switchUpstream(ids.main, upstream('socks', 1), null);
    assert.equal(await exitSeen(ids.main), lab.exits[1]!.address);
    await runtime.switchUpstream(ids.main, upstream('ss-aes-256-gcm', 0), null);
    assert.equal(await exitSeen(ids.main), lab.exits[0]!.address);
  });

  it('replaces an egress gateway made from an older recipe at a switch, relay included', async () => {
    const olderTag = `older-${run}`;
    await docker.getImage(images.egressGateway).tag({ repo: 'ccp-egress-gateway', tag: olderTag });
    const older = new DockerWorkspaceRuntime({
      docker,
      engine: v2rayEngine,
      images: { ...images, egressGateway: `ccp-egress-gateway:${olderTag}` },
      dataDir,
      egress: labEgressSettings(lab),
    });
    // Two runtimes of one gateway never exist; this runtime's watcher would relink behind the other's back.
    stopWatching();
    try {
      const gatewayId = async () => (await docker.getContainer(gateway(ids.main)).inspect()).Id;
      const current = await gatewayId();
      await older.switchUpstream(ids.main, upstream('socks', 1), null);
      assert.notEqual(await gatewayId(), current, 'the gateway of another recipe was replaced');
      assert.equal(await exitSeen(ids.main), lab.exits[1]!.address);
      const replaced = await gatewayId();
      await runtime.switchUpstream(ids.main, upstream('ss-aes-256-gcm', 0), null);
      assert.notEqual(await gatewayId(), replaced);
      assert.equal(await exitSeen(ids.main), lab.exits[0]!.address);
      endpoints = (await runtime.endpoints(ids.main))!;
      assert.equal((await sshLogin(endpoints, key.privateKey)).user, 'alice');
      const unchanged = await gatewayId();
      await runtime.switchUpstream(ids.main, upstream('ss-aes-256-gcm', 0), null);
      assert.equal(await gatewayId(), unchanged, 'a gateway of the current recipe is reloaded in place');
    } finally {
      stopWatching = runtime.watch((error) => console.error('watch:', error));
      await docker
        .getImage(`ccp-egress-gateway:${olderTag}`)
        .remove()
        .catch(() => undefined);
    }
  });

  it('goes back to the upstream it had when the new one fails its checks, and keeps running', async () => {
    await assert.rejects(
      runtime.switchUpstream(ids.main, upstream('socks', 1, '198.51.100.99'), upstream('ss-aes-256-gcm', 0)),
      (error: unknown) => error instanceof UpstreamSwitchReverted && error.code === 'exit_ip_mismatch',
    );
    assert.equal(await runtime.state(ids.main), 'running');
    assert.equal(await exitSeen(ids.main), lab.exits[0]!.address);
  });

  it('keeps the home and the SSH host key across stop and start', async () => {
    const written = await asUser(ids.main, 'sh', '-c', 'echo kept > ~/kept.txt');
    assert.equal(written.code, 0, written.stderr);
    const hostKey = (await sshLogin(endpoints, key.privateKey)).hostKey;
    await runtime.stop(ids.main);
    assert.equal(await runtime.state(ids.main), 'stopped');
    assert.equal(await runtime.endpoints(ids.main), null);
    endpoints = await runtime.start(spec(ids.main), upstream('trojan-tls', 1), noProgress);
    assert.equal((await asUser(ids.main, 'cat', '/home/alice/kept.txt')).stdout, 'kept');
    assert.equal((await sshLogin(endpoints, key.privateKey)).hostKey, hostKey);
    assert.equal(await exitSeen(ids.main), lab.exits[1]!.address);
  });

  it('keeps them across a rebuild too, in a new container', async () => {
    const before = (await docker.getContainer(workspace(ids.main)).inspect()).Id;
    const hostKey = (await sshLogin(endpoints, key.privateKey)).hostKey;
    await runtime.rebuild(spec(ids.main), upstream('vless-tcp'), noProgress);
    const afterId = (await docker.getContainer(workspace(ids.main)).inspect()).Id;
    assert.notEqual(afterId, before);
    endpoints = (await runtime.endpoints(ids.main))!;
    assert.equal((await asUser(ids.main, 'cat', '/home/alice/kept.txt')).stdout, 'kept');
    assert.equal((await sshLogin(endpoints, key.privateKey)).hostKey, hostKey);
    assert.equal(await exitSeen(ids.main), lab.exits[0]!.address);
  });

  it('links a workspace again after Docker restarts it or its egress gateway', async () => {
    for (const container of [workspace(ids.main), gateway(ids.main)]) {
      await docker.getContainer(container).restart({ t: 1 });
      await eventually(`the host to be linked again after ${container} restarted`, async () =>
        (await runtime.state(ids.main)) === 'running' ? true : undefined,
      );
      assert.equal(await exitSeen(ids.main), lab.exits[0]!.address);
    }
    endpoints = (await runtime.endpoints(ids.main))!;
    assert.equal((await sshLogin(endpoints, key.privateKey)).user, 'alice');
  });

  it('reports a direct path when the egress gateway forwards around the tunnel and its uplink guard is gone', async () => {
    const pid = async (container: string) => (await docker.getContainer(container).inspect()).State.Pid;
    const [gatewayPid, workspacePid] = [await pid(gateway(ids.main)), await pid(workspace(ids.main))];
    // Sabotage from the host: an empty table of the right name, forwarding on, and masquerading so the
    // forwarded packets carry the gateway's uplink address (replies then come back to it, not to eth0).
    const ruleset = [
      'flush ruleset',
      'table inet ccp_egress {}',
      'table ip sabotage {',
      '  chain post { type nat hook postrouting priority srcnat; oifname "eth0" masquerade; }',
      '}',
      '',
    ].join('\n');
    const netns = ['nsenter', `--net=/proc/${gatewayPid}/ns/net`, '--'];
    const loaded = spawnSync(netns[0]!, [...netns.slice(1), 'nft', '-f', '-'], {
      input: ruleset,
      encoding: 'utf8',
    });
    assert.equal(loaded.status, 0, loaded.stderr);
    await exec(netns[0]!, [...netns.slice(1), 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
    const uplink = (await docker.getNetwork('ccp-uplink').inspect()) as {
      IPAM: { Config: { Gateway: string }[] };
    };
    const check = () =>
      verifyEgressPath(
        {
          workspacePid,
          gatewayPid,
          exitIp: lab.exits[0]!.address,
          uplinkHostAddress: uplink.IPAM.Config[0]!.Gateway,
        },
        verificationPlan(labEgressSettings(lab)),
        { nodeCommand: process.execPath, httpTimeoutMs: 5000, dnsTimeoutMs: 5000 },
      );
    // The host's guard on the gateway's uplink port still holds: nothing reached the control plane's address;
    // the check fails on what it finds inside the gateway (forwarding on), and the host would not run.
    await assert.rejects(
      check(),
      (error: unknown) =>
        error instanceof RuntimeError &&
        error.code === 'direct_path_open' &&
        /IP forwarding is on/.test(error.message),
    );
    // Without the guard too (both layers gone), the check itself finds the way around.
    await exec('nft', ['delete', 'table', 'netdev', `ccp_uplink_${ids.main}`]);
    await assert.rejects(
      check(),
      (error: unknown) =>
        error instanceof RuntimeError &&
        error.code === 'direct_path_open' &&
        /without the tunnel/.test(error.message),
    );
    // The next start makes a fresh egress gateway: the damage is gone with its namespace.
    await runtime.start(spec(ids.main), upstream('vmess-ws-tls'), noProgress);
    assert.equal(await exitSeen(ids.main), lab.exits[0]!.address);
  });

  it('refuses to start without its images and names the build command', async () => {
    const missing = new DockerWorkspaceRuntime({
      docker,
      engine: v2rayEngine,
      images: { workspace: 'ccp-workspace:test-000000000000', egressGateway: runtime.imageTag() },
      dataDir,
      egress: labEgressSettings(lab),
    });
    await assert.rejects(
      missing.start(spec(ids.wrong), upstream('socks'), noProgress),
      (error: unknown) =>
        error instanceof RuntimeError &&
        error.code === 'image_missing' &&
        error.message.includes('image/build.sh --variant test all'),
    );
    assert.deepEqual(await labelled(ids.wrong), { containers: [], volumes: [] });
  });

  it('fails a start whose exit IP is not the declared one, leaving nothing running', async () => {
    await assert.rejects(
      runtime.start(spec(ids.wrong), upstream('vmess-tcp', 0, '198.51.100.99'), noProgress),
      (error: unknown) => error instanceof RuntimeError && error.code === 'exit_ip_mismatch',
    );
    assert.equal(await runtime.state(ids.wrong), 'stopped');
    const { containers } = await labelled(ids.wrong);
    assert.equal(containers.length, 2);
    assert.deepEqual(
      containers.filter((container) => container.State === 'running'),
      [],
    );
  });

  /** Starts a host through an upstream that never answers and cancels it once the path check waits on it. */
  const cancelledStart = async (hostId: string) => {
    const silent: UpstreamSpec = {
      ...upstream('socks', 0),
      config: { ...(variant(lab, 'socks', 0).proxyConfig as ProxyConfig), server: '203.0.113.59' },
    };
    const controller = new AbortController();
    let abortedAt = 0;
    const start = runtime.start(
      spec(hostId),
      silent,
      async (_progress, stage) => {
        if (!stage.startsWith('verifying the path')) return;
        setTimeout(() => {
          abortedAt = Date.now();
          controller.abort();
        }, 1000);
      },
      controller.signal,
    );
    await assert.rejects(
      start,
      (error: unknown) => error instanceof RuntimeError && error.code === 'cancelled',
    );
    assert.ok(abortedAt > 0, 'the start reached the path check');
    const took = Date.now() - abortedAt;
    assert.ok(took < 5000, `the cancelled start took ${took} ms to end`);
  };

  /** What a workspace's entrypoint said, over all its starts. */
  const entrypointLog = async (hostId: string) => {
    const { stdout, stderr } = await exec('docker', ['logs', workspace(hostId)]);
    return stdout + stderr;
  };
  const times = (text: string, pattern: RegExp) => text.match(pattern)?.length ?? 0;
  const sshdListening = /Server listening on 0\.0\.0\.0 port 22/g;
  /**
   * A new host started while it was being made: running, reached as its user, leaving from the exit, and its
   * user made once, in one run of its container (no set-up was stopped under the start). Stops it.
   */
  const assertStartedInOneRun = async (hostId: string, started: WorkspaceEndpoints) => {
    assert.equal(await runtime.state(hostId), 'running');
    assert.equal((await sshLogin(started, key.privateKey)).user, 'alice');
    assert.equal(await exitSeen(hostId), lab.exits[0]!.address);
    const log = await entrypointLog(hostId);
    assert.equal(times(log, /created user/g), 1);
    assert.equal(times(log, sshdListening), 1);
    await runtime.stop(hostId);
  };

  it("sets a new host's user, home and host key up at its creation, once, with nothing left running", async () => {
    await runtime.prepare(spec(ids.ahead));
    const made = await docker.getContainer(workspace(ids.ahead)).inspect();
    assert.equal(made.State.Status, 'exited');
    assert.equal(made.HostConfig.NetworkMode, 'none');
    // dockerode's type of an inspect leaves the field out; Docker's answer has it.
    assert.equal((made.Config as { NetworkDisabled?: boolean }).NetworkDisabled, true);
    assert.equal((await labelled(ids.ahead)).containers.length, 1);
    const setUp = await entrypointLog(ids.ahead);
    for (const said of [
      /created user alice \(1000:1000\)/,
      /populated \/home\/alice/,
      /generated a new SSH host key/,
    ])
      assert.match(setUp, said);

    const started = await runtime.start(spec(ids.ahead), upstream('vmess-tcp'), noProgress);
    assert.equal((await docker.getContainer(workspace(ids.ahead)).inspect()).Id, made.Id);
    // The first start found them in place: each was made once.
    const log = await entrypointLog(ids.ahead);
    assert.equal(times(log, /created user/g), 1);
    assert.equal(times(log, /populated/g), 1);
    assert.equal(times(log, /generated a new SSH host key/g), 1);
    assert.equal(times(log, /key login only/g), 1);
    // The start ran the container a second time, not the set-up's run left going.
    const running = await docker.getContainer(workspace(ids.ahead)).inspect();
    assert.ok(Date.parse(running.State.StartedAt) > Date.parse(made.State.StartedAt), 'started again');
    // The set-up is stopped once its entrypoint has become sshd, which may be before sshd says it listens; and
    // Docker copies output to the log on its own time. So: the start's line, and at most the set-up's beside it.
    const sshdLines = await eventually('the started sshd in the log', async () => {
      const count = times(await entrypointLog(ids.ahead), sshdListening);
      return count >= 1 ? count : undefined;
    });
    assert.ok(sshdLines <= 2, `sshd said it listens ${sshdLines} times in two runs`);
    assert.equal((await sshLogin(started, key.privateKey)).user, 'alice');
    assert.equal((await asUser(ids.ahead, 'sh', '-c', 'test -f ~/.zshrc && echo home')).stdout, 'home');
    assert.equal(await exitSeen(ids.ahead), lab.exits[0]!.address);
    await runtime.stop(ids.ahead);

    // A rebuild of the stopped host sets its new container up the same way, in the home it keeps.
    await runtime.rebuild(spec(ids.ahead), null, noProgress);
    const rebuilt = await docker.getContainer(workspace(ids.ahead)).inspect();
    assert.notEqual(rebuilt.Id, made.Id);
    assert.equal(rebuilt.State.Status, 'exited');
    const rebuiltLog = await entrypointLog(ids.ahead);
    assert.equal(times(rebuiltLog, /created user alice/g), 1);
    assert.equal(times(rebuiltLog, /populated/g), 0);
    assert.equal(await runtime.state(ids.ahead), 'stopped');
  });

  it('lets a start asked during that set-up take the workspace over, and leaves it running', async () => {
    const preparing = runtime.prepare(spec(ids.takeover));
    const settingUp = await eventually('the set-up to begin', async () => {
      const info = await docker
        .getContainer(workspace(ids.takeover))
        .inspect()
        .catch(() => null);
      return info?.State.Running ? info.State.StartedAt : undefined;
    });
    const started = await runtime.start(spec(ids.takeover), upstream('vmess-tcp'), noProgress);
    await preparing;
    // The same run of the container: the start neither waited for the set-up's stop nor restarted it.
    const info = await docker.getContainer(workspace(ids.takeover)).inspect();
    assert.equal(info.State.StartedAt, settingUp);
    await assertStartedInOneRun(ids.takeover, started);
  });

  it('starts a host asked to start with its creation, as a script that creates and starts one does', async () => {
    const preparing = runtime.prepare(spec(ids.atCreation));
    const started = await runtime.start(spec(ids.atCreation), upstream('vmess-tcp'), noProgress);
    await preparing;
    await assertStartedInOneRun(ids.atCreation, started);
  });

  it('ends a first start that waits on a silent upstream at once, leaving nothing behind', async () => {
    await cancelledStart(ids.cancel);
    assert.deepEqual(await labelled(ids.cancel), { containers: [], volumes: [] });
    assert.equal(await runtime.state(ids.cancel), 'missing');
    await assert.rejects(stat(path.join(dataDir, 'runtime', 'egress', ids.cancel)), { code: 'ENOENT' });
  });

  it('keeps the workspace and home of a host that ran before when its start is cancelled', async () => {
    await runtime.stop(ids.main);
    const before = await labelled(ids.main);
    await cancelledStart(ids.main);
    const left = await labelled(ids.main);
    assert.deepEqual(
      left.containers.map((container) => [container.Names[0], container.State]),
      [[`/${workspace(ids.main)}`, 'exited']],
    );
    assert.deepEqual(
      left.volumes.map((volume) => volume.Name).sort(),
      before.volumes.map((volume) => volume.Name).sort(),
    );
    assert.equal(await runtime.state(ids.main), 'stopped');
  });

  it('removes every container, volume and file of a host', async () => {
    for (const hostId of Object.values(ids)) {
      await runtime.remove(hostId);
      const { containers, volumes } = await labelled(hostId);
      assert.deepEqual(containers, []);
      assert.deepEqual(volumes, []);
      assert.equal(await runtime.state(hostId), 'missing');
      await assert.rejects(stat(path.join(dataDir, 'runtime', 'egress', hostId)), { code: 'ENOENT' });
    }
    assert.ok(!(await runtime.hostIds()).some((hostId) => hostId.startsWith(run)));
  });
});

/**
 * Logs in as the key's user through the relay; returns who the shell is and the server's host key (base64).
 */
function sshLogin(
  endpoints: WorkspaceEndpoints,
  privateKey: string,
): Promise<{ user: string; hostKey: string }> {
  return new Promise((resolve, reject) => {
    const client = new Client();
    let hostKey = '';
    client
      .on('ready', () => {
        execAndEnd(client, 'id -un').then((out) => resolve({ user: out.trim(), hostKey }), reject);
      })
      .on('error', reject)
      .connect({
        host: endpoints.ssh.host,
        port: endpoints.ssh.port,
        username: 'alice',
        privateKey,
        readyTimeout: 10_000,
        hostVerifier: (key: Buffer) => {
          // The raw key blob, which is what the .pub file's second field encodes.
          hostKey = key.toString('base64');
          return true;
        },
      });
  });
}
