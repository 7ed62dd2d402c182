import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import pino from 'pino';
import { removeDataDir } from '../../../../test/support/data-dir.js';
import { loadConfig } from '../../src/config.js';
import { SecretBox } from '../../src/domain/access/secret-box.js';
import { createGateway, type Gateway, type GatewayOptions } from '../../src/gateway.js';
import type { WorkspaceRuntime } from '../../src/runtime/workspace-runtime.js';
import { MemoryRuntime } from './memory-runtime.js';

export type DatabaseKind = 'sqlite' | 'postgres';

/** The databases every repository and HTTP test runs against; CI sets both. */
export const DATABASES: DatabaseKind[] = (process.env.TEST_DATABASES ?? 'sqlite,postgres')
  .split(',')
  .map((d) => d.trim())
  .filter((d): d is DatabaseKind => d === 'sqlite' || d === 'postgres');

/** A PostgreSQL role that may create databases; scripts/test.sh creates it. */
export const POSTGRES_ADMIN_URL =
  process.env.TEST_POSTGRES_URL ?? 'postgres://ccp_test:ccp_test@127.0.0.1:5432/postgres';

export const ADMIN_PASSWORD = 'admin-password-for-tests';

/** A route the gateway registered: its method and its URL pattern in Fastify's syntax (`/v1/admin/hosts/:hostID`). */
export interface RegisteredRoute {
  method: string;
  url: string;
}

/**
 * Every route and method in Fastify's printed radix tree ("├── users (POST, GET, HEAD)" under "└── dmin/", ...).
 * The tree with common prefixes is the router's own; the one without them drops static parts before a wildcard.
 */
export function registeredRoutes(app: Gateway['http']): RegisteredRoute[] {
  const routes: RegisteredRoute[] = [];
  const prefixes: string[] = [];
  for (const line of app.printRoutes().split('\n')) {
    const match = /^((?:[│ ] {3})*)[├└]── (.+?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!match) continue;
    const depth = match[1]!.length / 4;
    const url = (prefixes[depth - 1] ?? '') + match[2]!;
    prefixes[depth] = url;
    prefixes.length = depth + 1;
    for (const method of match[3]?.split(', ') ?? []) routes.push({ method, url });
  }
  return routes;
}

export interface TestGateway {
  gateway: Gateway;
  kind: DatabaseKind;
  dataDir: string;
  /** Base URL once `listen()` was called. */
  url: string;
  adminToken: string;
  listen(): Promise<string>;
  request(
    method: string,
    url: string,
    options?: {
      token?: string | null;
      body?: unknown;
      headers?: Record<string, string>;
      /** The client address the gateway sees (rate limits count per address); 127.0.0.1 by default. */
      remoteAddress?: string;
    },
  ): Promise<{ status: number; body: any; headers: Record<string, unknown> }>;
  login(username: string, password: string): Promise<string>;
  /** Creates a user through the API and returns its id, token and SSH credentials. */
  createUser(
    username: string,
    password?: string,
  ): Promise<{ id: string; token: string; password: string; sshPass: string }>;
  /** An egress IP with a SOCKS5 upstream at `address` (nothing need listen there for a MemoryRuntime); its id. */
  createEgressIp(address: string, label?: string): Promise<string>;
  /** A host of the user bound to the egress IP (placed on `node` when given), started and waited for unless
   * `start` is false; the created host as the API answered. */
  createHost(userId: string, egressIpId: string, options?: { node?: string; start?: boolean }): Promise<any>;
  close(): Promise<void>;
}

/** The environment of a tool run on the API document: whatever it would fetch goes to a closed loopback port. */
export const OFFLINE_TOOL_ENV: NodeJS.ProcessEnv = {
  ...process.env,
  HTTP_PROXY: 'http://127.0.0.1:9',
  HTTPS_PROXY: 'http://127.0.0.1:9',
  NO_PROXY: '',
};

/** The API document the gateway serves (`GET /v1/openapi.json`), written to `dir` for tools that read a file. */
export async function writeServedOpenApi(t: TestGateway, dir: string): Promise<string> {
  const response = await t.request('GET', '/v1/openapi.json', { token: null });
  if (response.status !== 200) throw new Error(`GET /v1/openapi.json: ${response.status}`);
  const file = path.join(dir, 'openapi.json');
  writeFileSync(file, JSON.stringify(response.body, null, 2));
  return file;
}

export async function createPostgresDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `ccp_t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(POSTGRES_ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
      await client.connect();
      await client.query(`drop database if exists ${name} with (force)`);
      await client.end();
    },
  };
}

export async function startTestGateway(
  kind: DatabaseKind,
  env: Record<string, string> = {},
  runtime: WorkspaceRuntime | 'docker' = new MemoryRuntime(),
  {
    secretsFrom,
    ...options
  }: Pick<GatewayOptions, 'egressTester' | 'activityProbe' | 'clock'> & {
    /** Another gateway's DATA_DIR whose secrets.key this one shares, as the nodes of one database do. */
    secretsFrom?: string;
  } = {},
): Promise<TestGateway> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'ccp-test-'));
  if (secretsFrom)
    copyFileSync(path.join(secretsFrom, SecretBox.FILE_NAME), path.join(dataDir, SecretBox.FILE_NAME));
  const pgDb = kind === 'postgres' ? await createPostgresDatabase() : null;
  const config = loadConfig({
    ADMIN_JWT_SECRET: randomBytes(36).toString('base64'),
    ADMIN_PASSWORD,
    DATA_DIR: dataDir,
    DATABASE_URL: pgDb ? pgDb.url : `sqlite:${path.join(dataDir, 'gateway.db')}`,
    HTTP_HOST: '127.0.0.1',
    HTTP_PORT: '0',
    ENTRY_PORT: '0',
    SSH_PROXY_PORT: '0',
    LOG_LEVEL: 'silent',
    DOCKER_SOCKET: path.join(dataDir, 'no-engine.sock'),
    // Tests never reach a public address: the verification endpoints default to a lab address nothing answers.
    EGRESS_DOH_URL: 'https://203.0.113.59/dns-query',
    EGRESS_DNS_SERVER: '203.0.113.59:53',
    EGRESS_EXIT_IP_URLS: 'http://203.0.113.59/ip',
    // Tests that write host rows of their own would see them failed against the engine: on where a test asks.
    HOST_CHECK_SECONDS: '0',
    // The lifecycle policy's rounds likewise (tests of it turn them on, or run them by hand).
    HOST_ACTIVITY_SECONDS: '0',
    ...env,
  });
  const gateway = await createGateway(config, {
    logger: pino({ level: 'silent' }),
    httpLogger: false,
    // 'docker' leaves the gateway its default runtime: the Docker driver for the configured images.
    ...(runtime === 'docker' ? {} : { runtime }),
    ...options,
  });

  const t: TestGateway = {
    gateway,
    kind,
    dataDir,
    url: '',
    adminToken: '',
    async listen() {
      await gateway.listen();
      const address = gateway.http.server.address();
      if (!address || typeof address === 'string') throw new Error('no address');
      t.url = `http://127.0.0.1:${address.port}`;
      return t.url;
    },
    async request(method, url, options = {}) {
      const headers: Record<string, string> = { ...options.headers };
      const token = options.token === undefined ? t.adminToken : options.token;
      if (token) headers.authorization = `Bearer ${token}`;
      const response = await gateway.http.inject({
        method: method as 'GET',
        url,
        headers,
        ...(options.remoteAddress ? { remoteAddress: options.remoteAddress } : {}),
        ...(options.body === undefined ? {} : { payload: options.body as object }),
      });
      let body: unknown = response.body;
      if (response.headers['content-type']?.toString().includes('application/json')) body = response.json();
      return { status: response.statusCode, body, headers: response.headers };
    },
    async login(username, password) {
      const response = await t.request('POST', '/v1/auth/login', {
        token: null,
        body: { username, password },
      });
      if (response.status !== 200)
        throw new Error(`login ${username}: ${response.status} ${JSON.stringify(response.body)}`);
      return response.body.token as string;
    },
    async createUser(username, password = `${username}-password`) {
      const created = await t.request('POST', '/v1/admin/users', { body: { username, password } });
      if (created.status !== 201)
        throw new Error(`create ${username}: ${created.status} ${JSON.stringify(created.body)}`);
      return {
        id: created.body.id,
        password,
        sshPass: created.body.ssh_credentials.ssh_pass,
        token: await t.login(username, password),
      };
    },
    async createEgressIp(address, label = 'exit') {
      const created = await t.request('POST', '/v1/admin/egress-ips', {
        body: {
          label,
          ip_address: address,
          proxy_config: { type: 'socks', server: address, server_port: 1080, version: '5' },
        },
      });
      if (created.status !== 201)
        throw new Error(`egress IP ${address}: ${created.status} ${JSON.stringify(created.body)}`);
      return created.body.id as string;
    },
    async createHost(userId, egressIpId, { node, start = true } = {}) {
      const created = await t.request('POST', '/v1/admin/hosts', {
        body: { user_id: userId, egress_ip_id: egressIpId, ...(node ? { node } : {}) },
      });
      if (created.status !== 201)
        throw new Error(`host of ${userId}: ${created.status} ${JSON.stringify(created.body)}`);
      if (start) {
        const started = await t.request('POST', `/v1/admin/hosts/${created.body.id}/start`);
        if (started.status !== 202)
          throw new Error(`start ${created.body.id}: ${started.status} ${JSON.stringify(started.body)}`);
        await gateway.tasks.idle();
      }
      return created.body;
    },
    async close() {
      try {
        await gateway.close();
      } finally {
        await pgDb?.drop();
        removeDataDir(dataDir);
      }
    },
  };
  t.adminToken = await t.login('admin', ADMIN_PASSWORD);
  return t;
}
