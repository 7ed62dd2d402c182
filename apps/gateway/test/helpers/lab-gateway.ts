import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import Docker from 'dockerode';
import { ensureLab, type LabDescription } from '../../../../test/lab/lab.js';
import { freeLoopbackPort } from '../../src/egress/loopback-ports.js';
import type { GatewayOptions } from '../../src/gateway.js';
import { egressGatewayName, HOST_LABEL } from '../../src/runtime/container-specs.js';
import { releaseUplink } from '../../src/runtime/uplink-guard.js';
import { buildTestImages, labEgressEnv } from './lab-egress.js';
import { within } from './openssh.js';
import { type DatabaseKind, startTestGateway, type TestGateway } from './test-gateway.js';

const docker = new Docker({ socketPath: '/var/run/docker.sock' });

/**
 * A loopback TCP port free a moment ago, for a gateway process told its ports before it listens. Taken below the
 * kernel's ephemeral range, where no other test's connection or listen(0) is given it meanwhile: a port from
 * listen(0) went to someone else before the gateway listened once in CI (EADDRINUSE).
 */
export async function freePort(): Promise<number> {
  const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
  for (let attempt = 0; low > BELOW_EPHEMERAL + 1000 && attempt < 50; attempt++) {
    const port = BELOW_EPHEMERAL + Math.floor(Math.random() * (low - BELOW_EPHEMERAL));
    if (await isFree(port)) return port;
  }
  return freeLoopbackPort();
}

/** The lowest port freePort takes (registered services below it are left alone). */
const BELOW_EPHEMERAL = 10_000;

/** Whether this process could listen on the loopback port now. */
function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * Removes every container, volume and uplink guard of these hosts (what a test made, whatever state it left),
 * and unmounts their homes (loop-mounted ext4 images in the gateway's DATA_DIR) with their mount points'
 * immutable flag lifted, so that the test's data directory can be removed and no loop device is left behind.
 */
export async function removeHostResources(hostIds: Iterable<string>): Promise<void> {
  const ids = [...hostIds];
  releaseHomesOf(ids);
  for (const hostId of ids) {
    // The host-side nftables table guarding its gateway's uplink outlives the containers; left behind, every
    // test's tables pile up and each later nft call reads them all (hundreds made a guard take over 10 s).
    await releaseUplink(hostId).catch(() => {});
    const filters = { label: [`${HOST_LABEL}=${hostId}`] };
    for (const container of await docker.listContainers({ all: true, filters }))
      await docker
        .getContainer(container.Id)
        .remove({ force: true })
        .catch(() => {});
    // An egress gateway the host took from the pool carries the host's name, not its label.
    await docker
      .getContainer(egressGatewayName(hostId))
      .remove({ force: true })
      .catch(() => {});
    for (const volume of (await docker.listVolumes({ filters })).Volumes ?? [])
      await docker
        .getVolume(volume.Name)
        .remove()
        .catch(() => {});
  }
}

export interface LabGateway {
  t: TestGateway;
  lab: LabDescription;
  /** An egress IP through the lab's first exit (VMess over TCP). */
  egressIpId: string;
  /**
   * Creates a host for a user, bound to that egress IP (or `egressIpId`) unless `bound` is false; it is removed
   * by `close`.
   */
  createHost(
    userId: string,
    bound?: boolean,
    egressIpId?: string,
  ): Promise<{ id: string; short_id: string; access_command: string }>;
  /** Starts a host and waits for its task; fails with the task's error. */
  startHost(hostId: string): Promise<void>;
  close(): Promise<void>;
}

/** A user of the lab gateway with one running host, as a test logs in and as an admin reads the host. */
export interface LabTenant {
  userId: string;
  hostId: string;
  /** `user+short_id`, what SSH logs in as. */
  login: string;
  sshPass: string;
  /** The gateway's SSH port. */
  port: number;
  /** The host as an admin reads it. */
  host(): Promise<any>;
  /** The host's events of one type, newest first. */
  events(type: string): Promise<any[]>;
}

/** Creates a user and a host bound to `egressIpId` (the lab gateway's own by default), and starts it. */
export async function startTenant(
  lab: LabGateway,
  username: string,
  egressIpId?: string,
): Promise<LabTenant> {
  const user = await lab.t.createUser(username);
  const created = await lab.createHost(user.id, true, egressIpId);
  await within(300_000, 'the workspace start', lab.startHost(created.id));
  return {
    userId: user.id,
    hostId: created.id,
    login: `${username}+${created.short_id}`,
    sshPass: user.sshPass,
    port: lab.t.gateway.ssh.port,
    host: async () => (await lab.t.request('GET', `/v1/admin/hosts/${created.id}`)).body,
    events: async (type) =>
      (await lab.t.request('GET', `/v1/admin/events?host_id=${created.id}&type=${type}`)).body.events,
  };
}

/**
 * A listening gateway on the Docker runtime with the test images, pointed at the network lab, with one
 * egress IP registered: what every test against real workspaces begins with.
 */
export async function startLabGateway(
  env: Record<string, string> = {},
  kind: DatabaseKind = 'sqlite',
  options: Pick<GatewayOptions, 'egressTester' | 'activityProbe' | 'clock'> = {},
): Promise<LabGateway> {
  const [, lab] = await Promise.all([buildTestImages(), ensureLab()]);
  const t = await startTestGateway(
    kind,
    { ...labEgressEnv(lab), WORKSPACE_IMAGE_VARIANT: 'test', DOCKER_SOCKET: '/var/run/docker.sock', ...env },
    'docker',
    options,
  );
  await t.listen();
  const exit = lab.exits[0]!;
  const egress = await t.request('POST', '/v1/admin/egress-ips', {
    body: {
      label: 'lab vmess',
      ip_address: exit.address,
      proxy_config: exit.variants['vmess-tcp'].proxyConfig,
    },
  });
  if (egress.status !== 201)
    throw new Error(`registering the lab's egress IP failed: ${JSON.stringify(egress.body)}`);
  const hostIds = new Set<string>();
  return {
    t,
    lab,
    egressIpId: egress.body.id,
    async createHost(userId, bound = true, egressIpId = egress.body.id) {
      const response = await t.request('POST', '/v1/admin/hosts', {
        body: { user_id: userId, ...(bound ? { egress_ip_id: egressIpId } : {}) },
      });
      if (response.status !== 201)
        throw new Error(`creating a host failed: ${JSON.stringify(response.body)}`);
      hostIds.add(response.body.id);
      return response.body;
    },
    async startHost(hostId) {
      const start = await t.request('POST', `/v1/admin/hosts/${hostId}/start`);
      if (start.status !== 202) throw new Error(`starting ${hostId} failed: ${JSON.stringify(start.body)}`);
      await t.gateway.tasks.settled(hostId);
      const task = (await t.request('GET', `/v1/admin/tasks/${start.body.task_id}`)).body;
      if (task.status !== 'succeeded')
        throw new Error(`the start of ${hostId} failed: ${JSON.stringify(task.error)}`);
    },
    async close() {
      await t.close().catch(() => {});
      await removeHostResources(hostIds);
    },
  };
}

function releaseHomesOf(hostIds: string[]): void {
  if (hostIds.length === 0) return;
  for (const line of readFileSync('/proc/self/mounts', 'utf8').split('\n')) {
    const target = line.split(' ')[1] ?? '';
    if (path.basename(path.dirname(target)) !== 'homes' || !hostIds.includes(path.basename(target))) continue;
    execFileSync('umount', ['--lazy', target]);
    spawnSync('chattr', ['-i', target]);
  }
}
