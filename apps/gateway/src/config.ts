import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HostResources } from '@ccp/api';
import { parse as parseDotenv } from 'dotenv';
import { ClusterVariables, type NodeSettings, nodeSettings } from './cluster/settings.js';
import { AccessVariables, parseDuration } from './domain/access/settings.js';
import {
  type EgressBudgetSettings,
  EgressBudgetVariables,
  egressBudgetSettings,
} from './domain/egress/settings.js';
import type { HostLifecycleSettings } from './domain/hosts/lifecycle-scheduler.js';
import { HostsVariables, hostLifecycleSettings } from './domain/hosts/settings.js';
import { type ShareSettings, SharesVariables, shareSettings } from './domain/shares/settings.js';
import { type EgressProbe, type EgressSettings, EgressVariables, egressSettings } from './egress/settings.js';
import { type HttpSettings, HttpVariables } from './http/settings.js';
import { type LogFormat, LoggingVariables } from './logger.js';
import { RuntimeVariables } from './runtime/settings.js';
import { checkVariable, parseHostPort, readVariables } from './shared/settings.js';
import { SshVariables } from './ssh/settings.js';
import { type DatabaseConfig, parseDatabaseUrl, StoreVariables } from './store/settings.js';

export { EGRESS_DEFAULTS } from './egress/settings.js';
export type { DatabaseConfig, EgressProbe, EgressSettings, LogFormat, NodeSettings };
export { parseDatabaseUrl, parseDuration };

/** The variables of each part, in the order docs/configuration.md lists them (`npm run docs:config`). */
export const SETTINGS = [
  { title: 'HTTP', source: 'apps/gateway/src/http/settings.ts', variables: HttpVariables },
  {
    title: 'Accounts and sign-in',
    source: 'apps/gateway/src/domain/access/settings.ts',
    variables: AccessVariables,
  },
  { title: 'SSH proxy', source: 'apps/gateway/src/ssh/settings.ts', variables: SshVariables },
  { title: 'Storage', source: 'apps/gateway/src/store/settings.ts', variables: StoreVariables },
  { title: 'Workspaces', source: 'apps/gateway/src/runtime/settings.ts', variables: RuntimeVariables },
  { title: 'Host checks', source: 'apps/gateway/src/domain/hosts/settings.ts', variables: HostsVariables },
  { title: 'Egress', source: 'apps/gateway/src/egress/settings.ts', variables: EgressVariables },
  {
    title: 'Egress budgets and pause',
    source: 'apps/gateway/src/domain/egress/settings.ts',
    variables: EgressBudgetVariables,
  },
  { title: 'Cluster', source: 'apps/gateway/src/cluster/settings.ts', variables: ClusterVariables },
  { title: 'Port sharing', source: 'apps/gateway/src/domain/shares/settings.ts', variables: SharesVariables },
  { title: 'Logging', source: 'apps/gateway/src/logger.ts', variables: LoggingVariables },
] as const;

/** Every setting, from the variables each part declares in its own settings.ts (SETTINGS). */
export interface Config extends HttpSettings {
  httpHost: string;
  httpPort: number;
  entryPort: number;
  /** A second port serving the dashboard (and the API it calls); 0 turns it off. */
  dashboardPort: number;
  /** The SSH proxy's address (SSH_PROXY_HOST, HTTP_HOST when unset): users reach it directly, while the API
   * may sit behind a reverse proxy on loopback. */
  sshProxyHost: string;
  sshProxyPort: number;
  /** SSH connections one address may have open before they log in (SSH_MAX_UNAUTHENTICATED_PER_ADDRESS). */
  sshMaxUnauthenticatedPerAddress: number;
  /** Live SSH sessions one user may have through the proxy (SSH_MAX_SESSIONS_PER_USER). */
  sshMaxSessionsPerUser: number;
  /** Browser terminals one user may have open on one gateway (TERMINALS_PER_USER). */
  terminalsPerUser: number;
  /** SSH sessions one host may have through the proxy, at most what its relay takes (SSH_MAX_SESSIONS_PER_HOST). */
  sshMaxSessionsPerHost: number;
  dataDir: string;
  database: DatabaseConfig;
  /** Port sharing: SHARE_DOMAIN or SHARE_PORTS, and its limits. */
  shares: ShareSettings;
  adminUsername: string;
  adminPassword: string | null;
  jwtSecret: string;
  tokenTtlSeconds: number;
  publicHost: string;
  publicEntryUrl: string;
  logLevel: string;
  logFormat: LogFormat;
  dockerSocket: string;
  eventRetentionDays: number;
  expirySweepSeconds: number;
  sseHeartbeatSeconds: number;
  egress: EgressSettings;
  /** The gateway's resources of a host whose own and whose owner's are not set (WORKSPACE_CPUS, ...). */
  workspaceLimits: HostResources;
  /** Seconds between checks of running hosts' memory and home use (RESOURCE_CHECK_SECONDS); 0 turns them off. */
  resourceCheckSeconds: number;
  /** Egress gateways started ahead (EGRESS_GATEWAY_POOL per upstream, EGRESS_GATEWAY_POOL_MAX in all). */
  egressGatewayPool: { perUpstream: number; max: number };
  workspaceImageVariant: 'full' | 'test';
  /** Seconds between checks of the upstreams running hosts use (0 turns them off). */
  egressHealthSeconds: number;
  /** How often the egress meter reads the gateways' byte counters (EGRESS_METER_SECONDS; 0 turns it off). */
  egressMeterSeconds: number;
  /** How often the egress policy's decisions are read (EGRESS_POLICY_LOG_SECONDS; 0 turns it off), and the
   * cap on distinct destinations a host and minute (EGRESS_POLICY_LOG_DESTINATIONS). */
  egressPolicyLog: { seconds: number; destinations: number };
  /** How often this node's running hosts are compared with its engine (HOST_CHECK_SECONDS); 0 turns it off. */
  hostCheckSeconds: number;
  /** Idle stop, maximum lifetime and weekly schedule: the global defaults and how the rounds run. */
  hostLifecycle: HostLifecycleSettings;
  /** Monthly egress budgets' defaults and the pause when an exit is in doubt. */
  egressBudgets: EgressBudgetSettings;
  /**
   * How much of an IPv6 address names one caller for the failure limits (RATE_LIMIT_IPV6_PREFIX, bits): a /64 is
   * one subscriber's, so per full address an attacker would have 2^64 of them. IPv4 counts per address.
   */
  rateLimitIpv6Prefix: number;
  /** A separate address serving GET /metrics without a token (METRICS_BIND); null: only admins on HTTP_PORT. */
  metricsBind: { host: string; port: number } | null;
  /** Folder mounts (the CLI's reverse sshfs): where they are made on this machine, and the user sshfs runs as. */
  folderMounts: { dir: string; user: string };
  /** The CLI's one-file bundle the gateway serves at /v1/cli/ccp.mjs (CLI_BUNDLE). */
  cliBundle: string;
  node: NodeSettings;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

/** Reads `.env` (when present) under the process environment: a variable set in the environment wins. */
export function readEnvironment(env: Env = process.env, envFile = path.resolve('.env')): Env {
  if (!existsSync(envFile)) return { ...env };
  const fromFile = parseDotenv(readFileSync(envFile));
  return { ...fromFile, ...env };
}

/** Builds the typed configuration, collecting every problem so the operator can fix them in one pass. */
export function loadConfig(env: Env): Config {
  const problems: string[] = [];
  const http = readVariables(HttpVariables, env, problems);
  const access = readVariables(AccessVariables, env, problems);
  const ssh = readVariables(SshVariables, env, problems);
  const store = readVariables(StoreVariables, env, problems);
  const runtime = readVariables(RuntimeVariables, env, problems);
  const hosts = readVariables(HostsVariables, env, problems);
  const egress = readVariables(EgressVariables, env, problems);
  const egressBudgets = readVariables(EgressBudgetVariables, env, problems);
  const cluster = readVariables(ClusterVariables, env, problems);
  const logging = readVariables(LoggingVariables, env, problems);
  const sharing = readVariables(SharesVariables, env, problems);

  const dataDir = path.resolve(store.DATA_DIR);
  const parsedDatabase = parseDatabaseUrl(
    store.DATABASE_URL || `sqlite:${path.join(dataDir, 'gateway.db')}`,
    dataDir,
  );
  if (typeof parsedDatabase === 'string') problems.push(parsedDatabase);
  const database: DatabaseConfig =
    typeof parsedDatabase === 'string' ? { kind: 'sqlite', file: '' } : parsedDatabase;

  const url = (name: 'PUBLIC_API_URL' | 'PUBLIC_ENTRY_URL', fallback: string): string => {
    // A default worked out from other settings is checked like a value given (which was, when read).
    if (!http[name]) checkVariable(HttpVariables, name, fallback.replace(/\/+$/, ''), problems);
    return (http[name] || fallback).replace(/\/+$/, '');
  };
  const { PUBLIC_HOST: publicHost, HTTP_PORT: httpPort, ENTRY_PORT: entryPort } = http;
  const publicApiUrl = url('PUBLIC_API_URL', `http://${publicHost}:${httpPort}`);
  // The access command pipes the entry script to `sh`: behind TLS it must come over TLS too.
  const behindTls = publicApiUrl.startsWith('https:');
  const publicEntryUrl = url(
    'PUBLIC_ENTRY_URL',
    behindTls
      ? publicApiUrl
      : entryPort === 80 || entryPort === 0
        ? `http://${publicHost}`
        : `http://${publicHost}:${entryPort}`,
  );
  if (behindTls && !publicEntryUrl.startsWith('https:'))
    problems.push(
      `PUBLIC_ENTRY_URL must be an https:// URL when PUBLIC_API_URL is (got "${publicEntryUrl}"): ` +
        'the access command pipes the entry script to sh, and over plain HTTP anyone on the path can change it',
    );

  const config: Config = {
    httpHost: http.HTTP_HOST,
    httpPort,
    entryPort,
    dashboardPort: http.DASHBOARD_PORT,
    sshProxyHost: ssh.SSH_PROXY_HOST || http.HTTP_HOST,
    sshMaxUnauthenticatedPerAddress: ssh.SSH_MAX_UNAUTHENTICATED_PER_ADDRESS,
    sshMaxSessionsPerUser: ssh.SSH_MAX_SESSIONS_PER_USER,
    terminalsPerUser: ssh.TERMINALS_PER_USER,
    sshMaxSessionsPerHost: ssh.SSH_MAX_SESSIONS_PER_HOST,
    sshProxyPort: ssh.SSH_PROXY_PORT,
    dataDir,
    database,
    adminUsername: access.ADMIN_USERNAME,
    adminPassword: access.ADMIN_PASSWORD || null,
    jwtSecret: access.ADMIN_JWT_SECRET ?? '',
    tokenTtlSeconds: parseDuration(access.TOKEN_TTL) ?? 43200,
    publicHost,
    publicApiUrl,
    publicEntryUrl,
    logLevel: logging.LOG_LEVEL,
    logFormat: logging.LOG_FORMAT,
    dockerSocket: runtime.DOCKER_SOCKET,
    eventRetentionDays: store.EVENT_RETENTION_DAYS,
    expirySweepSeconds: Math.min(access.EXPIRY_SWEEP_SECONDS, 60),
    sseHeartbeatSeconds: Math.min(http.SSE_HEARTBEAT_SECONDS, 20),
    egress: egressSettings(egress, problems),
    workspaceImageVariant: runtime.WORKSPACE_IMAGE_VARIANT,
    egressHealthSeconds: hosts.EGRESS_HEALTH_SECONDS,
    egressMeterSeconds: egress.EGRESS_METER_SECONDS,
    egressPolicyLog: {
      seconds: egress.EGRESS_POLICY_LOG_SECONDS,
      destinations: egress.EGRESS_POLICY_LOG_DESTINATIONS,
    },
    hostCheckSeconds: hosts.HOST_CHECK_SECONDS,
    hostLifecycle: hostLifecycleSettings(hosts, problems),
    egressBudgets: egressBudgetSettings(egressBudgets),
    rateLimitIpv6Prefix: access.RATE_LIMIT_IPV6_PREFIX,
    metricsBind: parseHostPort(http.METRICS_BIND),
    trustProxy: http.TRUST_PROXY,
    folderMounts: { dir: path.resolve(ssh.MOUNTS_DIR), user: ssh.MOUNT_USER },
    // apps/cli/dist/ccp.mjs of this checkout, from apps/gateway/src or apps/gateway/dist.
    cliBundle: path.resolve(
      http.CLI_BUNDLE || fileURLToPath(new URL('../../cli/dist/ccp.mjs', import.meta.url)),
    ),
    workspaceLimits: {
      memory_mb: runtime.WORKSPACE_MEMORY_MB,
      cpus: runtime.WORKSPACE_CPUS,
      pids: runtime.WORKSPACE_PIDS,
      home_mb: runtime.WORKSPACE_HOME_MB,
    },
    resourceCheckSeconds: runtime.RESOURCE_CHECK_SECONDS,
    egressGatewayPool: { perUpstream: runtime.EGRESS_GATEWAY_POOL, max: runtime.EGRESS_GATEWAY_POOL_MAX },
    node: nodeSettings(cluster, database.kind === 'postgres', problems),
    shares: shareSettings(sharing, problems),
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

/** The egress settings alone, from variables as an operator sets them (tests and benches use this too). */
export function egressSettingsFrom(env: Env): EgressSettings {
  const problems: string[] = [];
  const settings = egressSettings(readVariables(EgressVariables, env, problems), problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return settings;
}
