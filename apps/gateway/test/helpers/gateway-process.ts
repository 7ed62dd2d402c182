import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { LabDescription } from '../../../../test/lab/lab.js';
import { GATEWAY_NODE_FLAGS } from '../../src/node-flags.js';
import { labEgressEnv } from './lab-egress.js';
import { freePort } from './lab-gateway.js';
import { ADMIN_PASSWORD } from './test-gateway.js';

export const REPO_ROOT = path.resolve(import.meta.dirname, '../../../..');
/** The built gateway (`npm run build`). */
export const GATEWAY_MAIN = path.join(REPO_ROOT, 'apps/gateway/dist/main.js');

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` every 200 ms until it answers something truthy; errors count as "not yet". */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  ms = 60_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

/** One JSON request to a gateway's HTTP API; never throws on a status. */
export async function api(
  url: string,
  token: string | null,
  method: string,
  route: string,
  body?: unknown,
): Promise<{ status: number; body: any }> {
  const response = await fetch(`${url}${route}`, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

/**
 * The gateway as its own process, so it can be killed like a real one: by default the built
 * `apps/gateway/dist/main.js` with the gateway's node flags; `args` runs another entry with the same node (a test
 * entry through tsx).
 */
export class GatewayProcess {
  child: ChildProcess | null = null;
  output = '';
  constructor(
    readonly env: Record<string, string>,
    readonly url: string,
    readonly args: string[] = [...GATEWAY_NODE_FLAGS, GATEWAY_MAIN],
  ) {}

  async start(): Promise<void> {
    const child = spawn(process.execPath, this.args, {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? '', ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    child.stdout!.on('data', (d) => (this.output += d));
    child.stderr!.on('data', (d) => (this.output += d));
    // A gateway that exits (a port taken, a bad setting) fails the start at once, with its words.
    let answered = false;
    const exited = new Promise<never>((_, reject) =>
      child.once('exit', () => {
        if (!answered)
          reject(new Error(`the gateway exited before it answered: ${this.output.slice(-2000)}`));
      }),
    );
    await Promise.race([
      eventually('the gateway to answer', async () => (await fetch(`${this.url}/healthz`)).ok, 60_000),
      exited,
    ]);
    answered = true;
  }

  /** Whether the process runs now. */
  get running(): boolean {
    return !!this.child && this.child.exitCode === null && this.child.signalCode === null;
  }

  kill(signal: NodeJS.Signals): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      child.once('exit', () => resolve());
      child.kill(signal);
    });
  }
}

/**
 * A gateway process (not started yet) on SQLite in `dataDir`, on free loopback ports, pointed at the network lab,
 * with the test images and no periodic health round; `env` adds or overrides settings.
 */
export async function labGatewayProcess(
  lab: LabDescription,
  dataDir: string,
  env: Record<string, string> = {},
  args?: string[],
): Promise<{ gateway: GatewayProcess; url: string; sshPort: number }> {
  const [httpPort, sshPort] = [await freePort(), await freePort()];
  const url = `http://127.0.0.1:${httpPort}`;
  const gateway = new GatewayProcess(
    {
      ...labEgressEnv(lab),
      ADMIN_JWT_SECRET: randomBytes(36).toString('base64'),
      ADMIN_PASSWORD,
      DATA_DIR: dataDir,
      DATABASE_URL: `sqlite:${path.join(dataDir, 'gateway.db')}`,
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: String(httpPort),
      SSH_PROXY_PORT: String(sshPort),
      ENTRY_PORT: '0',
      LOG_LEVEL: 'warn',
      WORKSPACE_IMAGE_VARIANT: 'test',
      EGRESS_HEALTH_SECONDS: '0',
      HOST_CHECK_SECONDS: '0',
      // These gateways may be killed, which leaves pooled egress gateways (no host label) to the next process
      // of the same data directory; a test's has none. In-process test gateways keep the pool (close retires it).
      EGRESS_GATEWAY_POOL: '0',
      ...env,
    },
    url,
    args,
  );
  return { gateway, url, sshPort };
}

/**
 * A started gateway process on SQLite in its own folder under `work`, pointed at the lab, with an admin token,
 * one user (login password `password`) and a host of theirs bound to the lab's first exit (not started).
 */
export async function startLabGatewayProcessWithHost(
  lab: LabDescription,
  work: string,
  name: string,
  env: Record<string, string> = {},
) {
  const dataDir = path.join(work, name);
  mkdirSync(dataDir);
  const { gateway, url, sshPort } = await labGatewayProcess(lab, dataDir, env);
  await gateway.start();
  const token = (
    await api(url, null, 'POST', '/v1/auth/login', { username: 'admin', password: ADMIN_PASSWORD })
  ).body.token as string;
  const exit = lab.exits[0]!;
  const egress = await api(url, token, 'POST', '/v1/admin/egress-ips', {
    label: 'lab vmess',
    ip_address: exit.address,
    proxy_config: exit.variants['vmess-tcp'].proxyConfig,
  });
  const username = `${name}${randomBytes(2).toString('hex')}`;
  const password = 'a-long-enough-password';
  const user = await api(url, token, 'POST', '/v1/admin/users', { username, password });
  const host = await api(url, token, 'POST', '/v1/admin/hosts', {
    user_id: user.body.id,
    egress_ip_id: egress.body.id,
  });
  if (host.status !== 201) throw new Error(`creating the host failed: ${JSON.stringify(host.body)}`);
  return {
    gateway,
    url,
    sshPort,
    token,
    user: { id: user.body.id as string, username, password },
    hostId: host.body.id as string,
    shortId: host.body.short_id as string,
  };
}

/** Waits (up to 5 minutes) for a task to succeed or fail; the task as the admin API shows it. */
export const waitForTask = (url: string, token: string, taskId: string) =>
  eventually(
    'the task to finish',
    async () => {
      const task = (await api(url, token, 'GET', `/v1/admin/tasks/${taskId}`)).body;
      return task.status === 'succeeded' || task.status === 'failed' ? task : undefined;
    },
    300_000,
  );
