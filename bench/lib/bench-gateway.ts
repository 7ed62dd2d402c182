// The gateway under test for the SSH and VNC benches: the built gateway as its own process (SQLite in a
// temporary data directory, the lab's probe as egress settings), and one running host made through its HTTP
// API, with what both paths need to log in: the proxy's login and a user key, and the workspace's relay
// address, Linux user and the gateway's private key for it.
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import type Docker from 'dockerode';
import { desktopPasswordOf } from '../../apps/gateway/dist/domain/access/access.js';
import { SecretBox } from '../../apps/gateway/dist/domain/access/secret-box.js';
import { linuxUserFor } from '../../apps/gateway/dist/domain/hosts/host-view.js';
import { generateEd25519 } from '../../apps/gateway/dist/domain/users/ssh-public-key.js';
import {
  egressGatewayName,
  HOST_LABEL,
  OWNER_LABEL,
  UPLINK_NETWORK,
} from '../../apps/gateway/dist/runtime/container-specs.js';
import { WORKSPACE_PORTS } from '../../apps/gateway/dist/runtime/egress-gateway-files.js';
import { GATEWAY_NODE_FLAGS } from '../../apps/gateway/src/node-flags.js';
import { labEgressEnv } from '../../apps/gateway/test/helpers/lab-egress.js';
import { ensureLab, type LabDescription } from '../../test/lab/lab.js';
import { removeDataDir } from '../../test/support/data-dir.js';
import { removeLabelled, removeLeftoversOfEndedBenches } from '../start/containers.js';
import { type Child, onCleanup, startNode } from './children.js';
import { builtImages } from './images.js';
import { freePort, login, waitForHttp, waitForPort } from './net.js';

const GATEWAY_MAIN = path.resolve(import.meta.dirname, '../../apps/gateway/dist/main.js');
const TASK_TIMEOUT_MS = 180_000;
const START_ATTEMPTS = 5;

export interface GatewayOptions {
  dataDir: string;
  lab: LabDescription;
  /**
   * WORKSPACE_MEMORY_MB and WORKSPACE_PIDS, raised so the workspace can hold every session of the bench, and
   * SSH_MAX_SESSIONS_PER_USER and SSH_MAX_SESSIONS_PER_HOST when the bench opens more sessions per host than
   * one user or host may have (100).
   */
  limits: { memoryMb: number; pids: number; sshSessionsPerUser?: number; sshSessionsPerHost?: number };
  /** Extra node flags for the gateway process (--cpu-prof). */
  nodeFlags: string[];
}

export interface RunningGateway {
  child: Child;
  baseUrl: string;
  sshPort: number;
  api: Api;
}

export type Api = (
  method: string,
  route: string,
  body?: unknown,
) => Promise<{ status: number; body: Record<string, unknown> }>;

/** JSON requests to one gateway's API with a token; never throws on a status. */
export function adminApi(baseUrl: string, token: string): Api {
  return async (method, route, body) => {
    const response = await fetch(`${baseUrl}${route}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await response.text();
    return { status: response.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  };
}

/**
 * Starts `node apps/gateway/dist/main.js` with the gateway's node flags and a clean environment, and waits until both
 * ports answer.
 */
export async function startGateway(options: GatewayOptions): Promise<RunningGateway> {
  const [httpPort, sshPort] = [await freePort(), await freePort()];
  const adminPassword = randomBytes(18).toString('base64url');
  const child = startNode('gateway', [...GATEWAY_NODE_FLAGS, ...options.nodeFlags, GATEWAY_MAIN], {
    // Its own directory as the working directory, so no `.env` of the checkout is read.
    cwd: options.dataDir,
    env: {
      PATH: process.env.PATH,
      DATA_DIR: options.dataDir,
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: String(httpPort),
      SSH_PROXY_PORT: String(sshPort),
      ENTRY_PORT: '0',
      ADMIN_USERNAME: 'admin',
      ADMIN_PASSWORD: adminPassword,
      ADMIN_JWT_SECRET: randomBytes(32).toString('hex'),
      LOG_LEVEL: 'warn',
      DOCKER_SOCKET: process.env.DOCKER_SOCKET ?? '/var/run/docker.sock',
      WORKSPACE_IMAGE_VARIANT: 'test',
      WORKSPACE_MEMORY_MB: String(options.limits.memoryMb),
      WORKSPACE_PIDS: String(options.limits.pids),
      ...(options.limits.sshSessionsPerHost
        ? { SSH_MAX_SESSIONS_PER_HOST: String(options.limits.sshSessionsPerHost) }
        : {}),
      ...(options.limits.sshSessionsPerUser
        ? { SSH_MAX_SESSIONS_PER_USER: String(options.limits.sshSessionsPerUser) }
        : {}),
      // Nothing here may depend on the upstream's health checks.
      EGRESS_HEALTH_SECONDS: '0',
      ...labEgressEnv(options.lab),
    },
  });
  const baseUrl = `http://127.0.0.1:${httpPort}`;
  await Promise.race([
    waitForHttp(`${baseUrl}/healthz`, 30_000),
    child.exited.then((code) => {
      throw new Error(`the gateway exited (${code}): ${child.stderrTail()}`);
    }),
  ]);
  await waitForPort('127.0.0.1', sshPort, 10_000);
  const token = await login(baseUrl, 'admin', adminPassword);
  return { child, baseUrl, sshPort, api: adminApi(baseUrl, token) };
}

async function expect(
  api: Api,
  method: string,
  route: string,
  status: number,
  body?: unknown,
): Promise<Record<string, unknown>> {
  const response = await api(method, route, body);
  if (response.status !== status)
    throw new Error(`${method} ${route}: HTTP ${response.status} ${JSON.stringify(response.body)}`);
  return response.body;
}

export interface BenchHost {
  id: string;
  /** `<username>+<shortId>`, the login at the SSH proxy. */
  proxyLogin: string;
  /** A key registered for the user: OpenSSH format, also written to `userKeyFile` (mode 0600). */
  userKey: string;
  userKeyFile: string;
  /** The workspace's sshd as the proxy reaches it: the relay in the egress gateway. */
  direct: { host: string; port: number; linuxUser: string; privateKey: string; privateKeyFile: string };
  /** The VNC password the desktop asks for on the direct path (the proxy answers it for its clients). */
  desktopPassword: string;
}

/** What every host of one bench gateway shares: the egress IP they are bound to, and the Docker engine in
 * which their relays are found. */
interface HostFactory {
  gateway: RunningGateway;
  docker: Docker;
  egressIpId: string;
  /** The gateway's DATA_DIR (its database and secret key). */
  dataDir: string;
  /** Where the bench keeps its key files; not the gateway's. */
  workDir: string;
  onHost: (hostId: string) => void;
}

/**
 * Makes the user `username` with a registered key and a host of theirs bound to the shared egress IP; starts
 * the host and waits for its task. `onHost` gets the id as soon as it exists, for clean-up.
 */
async function createRunningHost(factory: HostFactory, username: string): Promise<BenchHost> {
  const { gateway, docker, egressIpId, dataDir, workDir, onHost } = factory;
  const { api } = gateway;
  const user = await expect(api, 'POST', '/v1/admin/users', 201, {
    username,
    password: randomBytes(18).toString('base64url'),
  });
  const pair = generateEd25519('ssh bench');
  await expect(api, 'POST', `/v1/admin/users/${String(user.id)}/ssh-keys`, 201, {
    public_key: pair.publicKey,
    label: 'ssh bench',
  });
  const host = await expect(api, 'POST', '/v1/admin/hosts', 201, {
    user_id: user.id,
    egress_ip_id: egressIpId,
  });
  const hostId = String(host.id);
  onHost(hostId);
  // Another gateway on the same Docker that relinks hosts on their start events can race this one's start.
  for (let attempt = 1; ; attempt++) {
    const started = await expect(api, 'POST', `/v1/admin/hosts/${hostId}/start`, 202);
    const failure = await waitForTask(api, String(started.task_id));
    if (failure === null) break;
    if (attempt === START_ATTEMPTS) throw new Error(`the host start failed ${attempt} times: ${failure}`);
    console.error(`host ${hostId}: start failed (${failure}); trying again`);
  }

  // The direct path: what the proxy itself uses to log in to the workspace.
  const db = new Database(path.join(dataDir, 'gateway.db'), { readonly: true });
  const row = db.prepare('SELECT gateway_key_sealed FROM hosts WHERE id = ?').get(hostId) as
    | { gateway_key_sealed: string | null }
    | undefined;
  db.close();
  if (!row?.gateway_key_sealed) throw new Error(`host ${hostId} has no gateway key`);
  const box = SecretBox.openInDirectory(dataDir);
  const privateKey = box.open(row.gateway_key_sealed);
  const relay = await relayAddress(docker, hostId);

  const userKeyFile = path.join(workDir, `user_key-${username}`);
  const privateKeyFile = path.join(workDir, `gateway_key-${username}`);
  writeFileSync(userKeyFile, pair.privateKey, { mode: 0o600 });
  writeFileSync(privateKeyFile, privateKey, { mode: 0o600 });
  return {
    id: hostId,
    proxyLogin: String((host.ssh as Record<string, unknown>).ssh_user),
    userKey: pair.privateKey,
    userKeyFile,
    direct: {
      host: relay,
      port: WORKSPACE_PORTS.ssh,
      linuxUser: linuxUserFor(username),
      privateKey,
      privateKeyFile,
    },
    desktopPassword: desktopPasswordOf(box, hostId),
  };
}

/**
 * The address of the host's egress gateway, where its relays listen. Read from Docker by the gateway's name,
 * which a gateway the host took from the gateway's pool also has (a runtime of the bench's own would not take
 * another instance's pooled gateway for the host's).
 */
async function relayAddress(docker: Docker, hostId: string): Promise<string> {
  const info = await docker.getContainer(egressGatewayName(hostId)).inspect();
  const address = info.NetworkSettings.Networks[UPLINK_NETWORK]?.IPAddress;
  if (!info.State.Running || !address)
    throw new Error(`host ${hostId} is running but its egress gateway has no address`);
  return address;
}

/** Null once the task succeeded, its error when it failed. */
async function waitForTask(api: Api, taskId: string): Promise<string | null> {
  const until = Date.now() + TASK_TIMEOUT_MS;
  while (Date.now() < until) {
    const task = await expect(api, 'GET', `/v1/admin/tasks/${taskId}`, 200);
    if (task.status === 'succeeded') return null;
    if (task.status === 'failed') return JSON.stringify(task.error);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`the host start did not finish within ${TASK_TIMEOUT_MS / 1000} s`);
}

export interface BenchSetup {
  gateway: RunningGateway;
  /** The first host, user `bench`'s. */
  host: BenchHost;
  lab: LabDescription;
  /** The bench's own scratch directory (key files, sockets); removed at the end. */
  workDir: string;
  /** Another running host on the same gateway and egress IP, owned by a new user `username`. */
  addHost: (username: string) => Promise<BenchHost>;
  /** Deletes every host through the API (once; also done at clean-up, before the gateway stops). */
  deleteHost: () => Promise<void>;
}

/**
 * Everything a bench against real workspaces needs: the test images checked, the lab up, the gateway started
 * and a running host, each undone at clean-up (the hosts through the API, then every container and volume of
 * this run by its owner label). The gateway's instance id, which Docker carries as that label, is
 * `bench-<name>-<pid>-<random>`, so a run also removes what an earlier one left when it was killed outright.
 */
export async function setUpBenchHost(
  name: string,
  docker: Docker,
  options: Pick<GatewayOptions, 'limits' | 'nodeFlags'>,
): Promise<BenchSetup> {
  await builtImages(docker, 'test');
  const swept = await removeLeftoversOfEndedBenches(docker);
  if (swept > 0) console.log(`Removed ${swept} containers and volumes left by earlier bench runs`);
  const lab = await ensureLab();
  const dataDir = mkdtempSync(path.join(tmpdir(), `ccp-bench-${name}-data-`));
  const workDir = mkdtempSync(path.join(tmpdir(), `ccp-bench-${name}-`));
  onCleanup(async () => {
    removeDataDir(dataDir);
    rmSync(workDir, { recursive: true, force: true });
  });
  const owner = `bench-${name}-${process.pid}-${randomBytes(3).toString('hex')}`;
  mkdirSync(path.join(dataDir, 'runtime'), { recursive: true, mode: 0o700 });
  writeFileSync(path.join(dataDir, 'runtime', 'instance-id'), `${owner}\n`, { mode: 0o600 });
  // Whatever the API did not remove (the gateway gone first, an interruption mid-start) goes by its labels;
  // the second sweep catches a container whose creation was still on its way to the daemon.
  const hostIds: string[] = [];
  onCleanup(async () => {
    for (const hostId of hostIds) await removeLabelled(docker, HOST_LABEL, hostId);
    await removeLabelled(docker, OWNER_LABEL, owner);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    await removeLabelled(docker, OWNER_LABEL, owner);
  }, 90_000);
  const gateway = await startGateway({ dataDir, lab, ...options });
  let deleted = false;
  const deleteHost = async () => {
    if (deleted) return;
    deleted = true;
    // A few at a time: each deletion is a task of the gateway's that removes two containers and two volumes.
    const queue = [...hostIds];
    const worker = async () => {
      for (let hostId = queue.shift(); hostId !== undefined; hostId = queue.shift()) {
        const response = await gateway.api('DELETE', `/v1/admin/hosts/${hostId}`).catch((error: unknown) => ({
          status: 0,
          body: { error: String(error) },
        }));
        if (response.status === 204 || response.status === 404) continue;
        console.error(`deleting host ${hostId}: HTTP ${response.status} ${JSON.stringify(response.body)}`);
        // An internal error's cause is only in the gateway's log (errors are logged at level 50).
        if (response.status >= 500)
          console.error(
            await gateway.child.waitForLine((line) => line.includes('"level":50'), 100).catch(() => ''),
          );
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
  };
  // Registered after the gateway's own stop, so it runs before it.
  onCleanup(deleteHost, 120_000);
  const exit = lab.exits[0]!;
  const egress = await expect(gateway.api, 'POST', '/v1/admin/egress-ips', 201, {
    label: 'lab vmess-tcp',
    ip_address: exit.address,
    proxy_config: exit.variants['vmess-tcp'].proxyConfig,
  });
  const factory: HostFactory = {
    gateway,
    docker,
    egressIpId: String(egress.id),
    dataDir,
    workDir,
    onHost: (id) => hostIds.push(id),
  };
  const host = await createRunningHost(factory, 'bench');
  return {
    gateway,
    host,
    lab,
    workDir,
    addHost: (username) => createRunningHost(factory, username),
    deleteHost,
  };
}
