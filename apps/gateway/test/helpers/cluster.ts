/**
 * Several gateway processes on one PostgreSQL database and the one Docker engine (issue 19): each node runs the
 * built gateway with its own DATA_DIR, NODE_NAME and ports, sharing what every gateway of one installation
 * shares (ADMIN_JWT_SECRET, DATABASE_URL, DATA_DIR/secrets.key). Used by test/cluster/three-nodes.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { ensureLab, type LabDescription } from '../../../../test/lab/lab.js';
import { SecretBox } from '../../src/domain/access/secret-box.js';
import { HOST_LABEL, OWNER_LABEL } from '../../src/runtime/container-specs.js';
import { MessageBytes } from '../../src/vnc/rfb-handshake.js';
import { openStream } from './fake-desktop.js';
import { api, eventually, type GatewayProcess, labGatewayProcess } from './gateway-process.js';
import { buildTestImages } from './lab-egress.js';
import { freePort, removeHostResources } from './lab-gateway.js';
import { ADMIN_PASSWORD, createPostgresDatabase } from './test-gateway.js';

const docker = new Docker({ socketPath: '/var/run/docker.sock' });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface ClusterNode {
  name: string;
  dataDir: string;
  url: string;
  sshPort: number;
  /** INTERNAL_BIND's port on 127.0.0.1: where other nodes reach this one. */
  internalPort: number;
  gateway: GatewayProcess;
}

export interface ClusterOptions {
  names?: string[];
  heartbeatSeconds?: number;
  deadSeconds?: number;
  /** Added to every node's settings. */
  env?: Record<string, string>;
}

export interface ApiAnswer {
  status: number;
  body: any;
}

/** What a created host is, as the tests need it. */
export interface ClusterHost {
  id: string;
  shortId: string;
  node: string;
  userId: string;
  /** `<username>+<short_id>`, the login at any node's SSH proxy. */
  login: string;
  sshPass: string;
  /** The user's API token. */
  token: string;
}

export class Cluster {
  readonly nodes: ClusterNode[] = [];
  lab!: LabDescription;
  /** An admin token: signed with the shared secret, good at every node. */
  token = '';
  /** The lab's first exit (VMess over TCP), registered once for the whole cluster. */
  egressIpId = '';
  readonly heartbeatSeconds: number;
  readonly deadSeconds: number;
  /** Every host made through `createHost` (for clean-up). */
  readonly hostIds = new Set<string>();
  private readonly work = mkdtempSync(path.join(tmpdir(), 'ccp-cluster-'));
  private database: Awaited<ReturnType<typeof createPostgresDatabase>> | null = null;
  private readonly owners = new Set<string>();

  constructor(private readonly options: ClusterOptions = {}) {
    this.heartbeatSeconds = options.heartbeatSeconds ?? 1;
    this.deadSeconds = options.deadSeconds ?? 3;
  }

  /**
   * Builds the test images, brings up the lab, makes the database and starts every node, the first alone (it
   * makes the schema and the admin account), then the others together.
   */
  async start(): Promise<void> {
    const [, lab] = await Promise.all([buildTestImages(), ensureLab()]);
    this.lab = lab;
    this.database = await createPostgresDatabase();
    // One key for every node, as an operator copies DATA_DIR/secrets.key before starting the others.
    const key = `${randomBytes(32).toString('base64')}\n`;
    const shared = {
      DATABASE_URL: this.database.url,
      ADMIN_JWT_SECRET: randomBytes(36).toString('base64'),
      NODE_HEARTBEAT_SECONDS: String(this.heartbeatSeconds),
      NODE_DEAD_SECONDS: String(this.deadSeconds),
      ...this.options.env,
    };
    for (const name of this.options.names ?? ['n1', 'n2', 'n3']) {
      const dataDir = path.join(this.work, name);
      mkdirSync(dataDir, { mode: 0o700 });
      writeFileSync(path.join(dataDir, SecretBox.FILE_NAME), key, { mode: 0o600 });
      const internalPort = await freePort();
      const made = await labGatewayProcess(lab, dataDir, {
        ...shared,
        NODE_NAME: name,
        INTERNAL_BIND: `127.0.0.1:${internalPort}`,
      });
      this.nodes.push({
        name,
        dataDir,
        url: made.url,
        sshPort: made.sshPort,
        internalPort,
        gateway: made.gateway,
      });
    }
    const [first, ...others] = this.nodes;
    await first!.gateway.start();
    await Promise.all(others.map((node) => node.gateway.start()));
    for (const node of this.nodes) this.owners.add(this.ownerOf(node.name));
    const login = await api(first!.url, null, 'POST', '/v1/auth/login', {
      username: 'admin',
      password: ADMIN_PASSWORD,
    });
    if (login.status !== 200) throw new Error(`admin login: ${JSON.stringify(login.body)}`);
    this.token = login.body.token;
    const exit = lab.exits[0]!;
    const egress = await this.api(first!.name, 'POST', '/v1/admin/egress-ips', {
      label: 'lab vmess',
      ip_address: exit.address,
      proxy_config: exit.variants['vmess-tcp'].proxyConfig,
    });
    if (egress.status !== 201) throw new Error(`egress IP: ${JSON.stringify(egress.body)}`);
    this.egressIpId = egress.body.id;
  }

  node(name: string): ClusterNode {
    const node = this.nodes.find((candidate) => candidate.name === name);
    if (!node) throw new Error(`no node ${name}`);
    return node;
  }

  /** The other nodes than `name`. */
  others(name: string): ClusterNode[] {
    return this.nodes.filter((node) => node.name !== name);
  }

  /** An admin request at one node; never throws on a status. */
  api(at: string, method: string, route: string, body?: unknown): Promise<ApiAnswer> {
    return api(this.node(at).url, this.token, method, route, body);
  }

  /** The owner label of the containers a node makes: the instance id of its DATA_DIR. */
  ownerOf(name: string): string {
    return readFileSync(path.join(this.node(name).dataDir, 'runtime', 'instance-id'), 'utf8').trim();
  }

  /** The node whose containers these are, by their owner label (null: none, or one of another gateway). */
  async containerOwner(
    hostId: string,
  ): Promise<{ node: string | null; containers: number; running: number }> {
    const listed = await docker.listContainers({
      all: true,
      filters: { label: [`${HOST_LABEL}=${hostId}`] },
    });
    const owners = new Set(listed.map((container) => container.Labels[OWNER_LABEL]));
    const node =
      owners.size === 1 ? this.nodes.find((n) => this.ownerOf(n.name) === [...owners][0]) : undefined;
    return {
      node: node?.name ?? null,
      containers: listed.length,
      running: listed.filter((container) => container.State === 'running').length,
    };
  }

  /** A user and a host for it bound to the lab's exit, made at `at`, optionally pinned to a node. */
  async createHost(at: string, username: string, pinned?: string): Promise<ClusterHost> {
    const password = `${username}-password`;
    const user = await this.api(at, 'POST', '/v1/admin/users', { username, password });
    if (user.status !== 201) throw new Error(`user ${username}: ${JSON.stringify(user.body)}`);
    const created = await this.api(at, 'POST', '/v1/admin/hosts', {
      user_id: user.body.id,
      egress_ip_id: this.egressIpId,
      ...(pinned ? { node: pinned } : {}),
    });
    if (created.status !== 201) throw new Error(`host for ${username}: ${JSON.stringify(created.body)}`);
    this.hostIds.add(created.body.id);
    const login = await api(this.node(at).url, null, 'POST', '/v1/auth/login', { username, password });
    return {
      id: created.body.id,
      shortId: created.body.short_id,
      node: created.body.node,
      userId: user.body.id,
      login: created.body.ssh_user,
      sshPass: user.body.ssh_credentials.ssh_pass,
      token: login.body.token,
    };
  }

  /** Asks `at` for a lifecycle action (202) and waits, asking `at` again, until its task ends. */
  async task(at: string, hostId: string, action: string, ms = 240_000): Promise<any> {
    const accepted = await this.api(at, 'POST', `/v1/admin/hosts/${hostId}/${action}`);
    if (accepted.status !== 202)
      throw new Error(`${action} at ${at}: ${accepted.status} ${JSON.stringify(accepted.body)}`);
    return this.taskEnd(at, accepted.body.task_id, ms);
  }

  /** The task once it succeeded or failed, as `at` reports it. */
  taskEnd(at: string, taskId: string, ms = 240_000): Promise<any> {
    return eventually(
      `task ${taskId} to end (asked at ${at})`,
      async () => {
        const task = await this.api(at, 'GET', `/v1/admin/tasks/${taskId}`);
        return ['succeeded', 'failed'].includes(task.body?.status) ? task.body : undefined;
      },
      ms,
    );
  }

  /** A host as `at` reads it. */
  async host(at: string, hostId: string): Promise<any> {
    const read = await this.api(at, 'GET', `/v1/admin/hosts/${hostId}`);
    if (read.status !== 200)
      throw new Error(`GET host at ${at}: ${read.status} ${JSON.stringify(read.body)}`);
    return read.body;
  }

  /** Recorded events of one type (newest first), as `at` lists them. */
  async events(at: string, type: string, hostId?: string): Promise<any[]> {
    const query = new URLSearchParams({ type, limit: '200', ...(hostId ? { host_id: hostId } : {}) });
    const read = await this.api(at, 'GET', `/v1/admin/events?${query}`);
    if (read.status !== 200) throw new Error(`events at ${at}: ${read.status} ${JSON.stringify(read.body)}`);
    return read.body.events;
  }

  /**
   * Opens a host's desktop through one node as the browser's noVNC does (its websocket, the user's token), and
   * reads what the desktop itself sends after the client's init: the screen's size and the desktop's name.
   */
  async desktop(at: string, host: ClusterHost): Promise<{ width: number; height: number; name: string }> {
    const url = `${this.node(at).url.replace('http', 'ws')}/v1/user/hosts/${host.id}/vnc/websockify`;
    const opened = await openStream(url, { authorization: `Bearer ${host.token}` });
    if (!('socket' in opened)) throw new Error(`the desktop through ${at}: ${JSON.stringify(opened)}`);
    const { socket } = opened;
    try {
      const bytes = new MessageBytes(socket, 'gateway');
      socket.send(Buffer.from([1])); // ClientInit: shared
      const head = await bytes.read(24);
      const name = await bytes.read(head.readUInt32BE(20));
      return { width: head.readUInt16BE(0), height: head.readUInt16BE(2), name: name.toString('utf8') };
    } finally {
      socket.close();
    }
  }

  /** `kill -9` of one node's process. */
  kill9(name: string): Promise<void> {
    return this.node(name).gateway.kill('SIGKILL');
  }

  /** Starts a node again on its own DATA_DIR and ports. */
  restart(name: string): Promise<void> {
    return this.node(name).gateway.start();
  }

  /** The last lines each node printed, for a failure's message. */
  outputs(): string {
    return this.nodes.map((node) => `--- ${node.name}:\n${node.gateway.output.slice(-3000)}`).join('\n');
  }

  /**
   * Stops every node (SIGTERM, SIGKILL after 15 s), removes the containers and volumes of the hosts made and
   * every container its nodes own, drops the database and the data directories; safe after a partial start.
   */
  async close(): Promise<void> {
    await Promise.all(
      this.nodes.map(async ({ gateway }) => {
        const force = setTimeout(() => void gateway.kill('SIGKILL'), 15_000);
        await gateway.kill('SIGTERM').catch(() => {});
        clearTimeout(force);
      }),
    );
    // Twice: a request a node sent the engine just before it went may still make a container or volume.
    for (const pass of [1, 2]) {
      if (pass === 2) await sleep(2_000);
      await removeHostResources(this.hostIds).catch(() => {});
      for (const owner of this.owners) {
        const filters = { label: [`${OWNER_LABEL}=${owner}`] };
        for (const container of await docker.listContainers({ all: true, filters }).catch(() => []))
          await docker
            .getContainer(container.Id)
            .remove({ force: true })
            .catch(() => {});
      }
    }
    await this.database?.drop().catch(() => {});
    rmSync(this.work, { recursive: true, force: true });
  }
}
