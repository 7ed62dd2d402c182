import { existsSync, readFileSync } from 'node:fs';
import { isIP, isIPv4 } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { EgressPolicy } from '@ccp/api';
import { parse as parseDotenv } from 'dotenv';
import Value from 'typebox/value';
import type { EgressProbe, EgressSettings } from './egress/settings.js';
import { v2rayPolicyRules } from './egress/v2ray-policy.js';
import type { HttpSettings } from './http/settings.js';
import type { DatabaseConfig } from './store/settings.js';

export type { DatabaseConfig, EgressProbe, EgressSettings };

export type LogFormat = 'json' | 'pretty';

/** Every setting; each part declares the ones it reads (egress/, http/, store/ settings.ts). */
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
  dataDir: string;
  database: DatabaseConfig;
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
  workspaceLimits: { memoryMb: number; cpus: number; pids: number };
  workspaceImageVariant: 'full' | 'test';
  /** Seconds between checks of the upstreams running hosts use (0 turns them off). */
  egressHealthSeconds: number;
  /** How often the egress meter reads the gateways' byte counters (EGRESS_METER_SECONDS; 0 turns it off). */
  egressMeterSeconds: number;
  /** How often this node's running hosts are compared with its engine (HOST_CHECK_SECONDS); 0 turns it off. */
  hostCheckSeconds: number;
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

/** This gateway as one node of several sharing a PostgreSQL database (docs/install.md, "Several machines"). */
export interface NodeSettings {
  /** NODE_NAME: unique among the gateways on one database; hosts keep the node they were placed on. */
  name: string;
  /** NODE_MAX_HOSTS: hosts placed on this node at most. */
  maxHosts: number;
  heartbeatSeconds: number;
  /** A node silent this long is `unavailable` and its hosts `node_unavailable` (NODE_DEAD_SECONDS). */
  deadSeconds: number;
  /** INTERNAL_BIND: where the internal channel listens for sessions other nodes relay here; null: off. */
  internalBind: { host: string; port: number } | null;
  /** INTERNAL_ADDRESS: host:port other nodes dial for that channel (default: INTERNAL_BIND). */
  internalAddress: string | null;
}

/** The public defaults (docs/egress-probe.md says what each proves). */
export const EGRESS_DEFAULTS = {
  dohUrl: 'https://1.1.1.1/dns-query',
  dnsServer: '1.1.1.1:53',
  dnsWhoami: 'whoami.cloudflare',
  exitIpUrls: ['https://1.1.1.1/cdn-cgi/trace', 'https://checkip.amazonaws.com/'],
} as const;

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

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** Parses a duration such as `12h`, `30m`, `45s`, `2d` or a bare number of seconds. */
export function parseDuration(text: string): number | null {
  const match = /^(\d+)\s*(s|m|h|d)?$/.exec(text.trim());
  if (!match) return null;
  const unit = { s: 1, m: 60, h: 3600, d: 86400 }[(match[2] ?? 's') as 's' | 'm' | 'h' | 'd'];
  const seconds = Number(match[1]) * unit;
  return seconds > 0 ? seconds : null;
}

export function parseDatabaseUrl(url: string, dataDir: string): DatabaseConfig | string {
  for (const prefix of ['sqlite:', 'file:']) {
    if (url.startsWith(prefix)) {
      const file = url.slice(prefix.length).replace(/^\/\/(?=\/)/, '');
      if (!file) return `DATABASE_URL: "${prefix}" needs a file path, e.g. ${prefix}${dataDir}/gateway.db`;
      return { kind: 'sqlite', file: file === ':memory:' ? file : path.resolve(file) };
    }
  }
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return 'DATABASE_URL is not a valid postgres:// URL';
    }
    const mode = parsed.searchParams.get('sslmode') ?? 'disable';
    if (mode !== 'disable' && mode !== 'require' && mode !== 'verify-full') {
      return `DATABASE_URL: sslmode must be disable, require or verify-full (got "${mode}")`;
    }
    const rootCert = parsed.searchParams.get('sslrootcert');
    parsed.searchParams.delete('sslmode');
    parsed.searchParams.delete('sslrootcert');
    return { kind: 'postgres', connectionString: parsed.toString(), sslMode: mode, sslRootCert: rootCert };
  }
  return 'DATABASE_URL must start with sqlite:, file:, postgres:// or postgresql://';
}

/** Builds the typed configuration, collecting every problem so the operator can fix them in one pass. */
export function loadConfig(env: Env): Config {
  const problems: string[] = [];

  const port = (name: string, fallback: number, allowZero = false): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < (allowZero ? 0 : 1) || value > 65535) {
      problems.push(`${name} must be a port number${allowZero ? ' (0 turns it off)' : ''} (got "${raw}")`);
      return fallback;
    }
    return value;
  };
  const positive = (name: string, fallback: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < 1) {
      problems.push(`${name} must be a positive whole number (got "${raw}")`);
      return fallback;
    }
    return value;
  };

  const ipv6Prefix = (): number => {
    const raw = env.RATE_LIMIT_IPV6_PREFIX;
    if (raw === undefined || raw === '') return 64;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < 1 || value > 128) {
      problems.push(
        `RATE_LIMIT_IPV6_PREFIX must be a prefix length from 1 to 128, such as 64 (got "${raw}")`,
      );
      return 64;
    }
    return value;
  };

  const wholeNumber = (name: string, fallback: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < 0) {
      problems.push(`${name} must be a whole number, 0 or more (got "${raw}")`);
      return fallback;
    }
    return value;
  };
  const positiveNumber = (name: string, fallback: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isFinite(value) || value <= 0) {
      problems.push(`${name} must be a positive number (got "${raw}")`);
      return fallback;
    }
    return value;
  };

  const httpHost = env.HTTP_HOST || '0.0.0.0';
  const httpPort = port('HTTP_PORT', 8080, true); // 0 picks a free port (tests)
  const entryPort = port('ENTRY_PORT', 80, true);
  const dashboardPort = port('DASHBOARD_PORT', 0, true);
  const sshProxyHost = env.SSH_PROXY_HOST || httpHost;
  const sshProxyPort = port('SSH_PROXY_PORT', 2222, true); // 0 picks a free port (tests)
  const dataDir = path.resolve(env.DATA_DIR || 'data');

  const databaseUrl = env.DATABASE_URL || `sqlite:${path.join(dataDir, 'gateway.db')}`;
  const database = parseDatabaseUrl(databaseUrl, dataDir);
  if (typeof database === 'string') problems.push(database);

  const jwtSecret = env.ADMIN_JWT_SECRET ?? '';
  if (!jwtSecret) problems.push('ADMIN_JWT_SECRET is required (run deploy/setup.sh to generate one)');
  else if (jwtSecret.length < 32) problems.push('ADMIN_JWT_SECRET must be at least 32 characters');

  const adminUsername = env.ADMIN_USERNAME || 'admin';
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{2,49}$/.test(adminUsername)) {
    problems.push(
      'ADMIN_USERNAME must be 3 to 50 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit',
    );
  }
  const adminPassword = env.ADMIN_PASSWORD || null;
  if (adminPassword !== null && adminPassword.length < 8)
    problems.push('ADMIN_PASSWORD must be at least 8 characters');

  const ttlText = env.TOKEN_TTL || '12h';
  const tokenTtlSeconds = parseDuration(ttlText);
  if (tokenTtlSeconds === null)
    problems.push(`TOKEN_TTL must be a duration such as 12h, 30m or 3600 (got "${ttlText}")`);

  const logLevel = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);
  const logFormat = (env.LOG_FORMAT || 'json') as LogFormat;
  if (logFormat !== 'json' && logFormat !== 'pretty') problems.push('LOG_FORMAT must be json or pretty');

  const publicHost = env.PUBLIC_HOST || 'localhost';
  const url = (name: string, fallback: string): string => {
    const value = (env[name] || fallback).replace(/\/+$/, '');
    try {
      const parsed = new URL(value);
      if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Error('scheme');
    } catch {
      problems.push(`${name} must be an http:// or https:// URL (got "${value}")`);
    }
    return value;
  };
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

  const egress = parseEgressSettings(env, problems);
  const imageVariant = (env.WORKSPACE_IMAGE_VARIANT || 'full') as 'full' | 'test';
  if (imageVariant !== 'full' && imageVariant !== 'test') {
    problems.push('WORKSPACE_IMAGE_VARIANT must be full or test');
  }

  const mountUser = env.MOUNT_USER || 'ccp-mount';
  if (!/^[a-z_][a-z0-9_-]{0,31}$/.test(mountUser))
    problems.push(`MOUNT_USER must be a Linux user name (got "${mountUser}")`);

  const config: Config = {
    httpHost,
    httpPort,
    entryPort,
    dashboardPort,
    sshProxyHost,
    sshMaxUnauthenticatedPerAddress: positive('SSH_MAX_UNAUTHENTICATED_PER_ADDRESS', 64),
    sshMaxSessionsPerUser: positive('SSH_MAX_SESSIONS_PER_USER', 100),
    sshProxyPort,
    dataDir,
    database: typeof database === 'string' ? { kind: 'sqlite', file: '' } : database,
    adminUsername,
    adminPassword,
    jwtSecret,
    tokenTtlSeconds: tokenTtlSeconds ?? 43200,
    publicHost,
    publicApiUrl,
    publicEntryUrl,
    logLevel,
    logFormat,
    dockerSocket: env.DOCKER_SOCKET || '/var/run/docker.sock',
    eventRetentionDays: positive('EVENT_RETENTION_DAYS', 90),
    expirySweepSeconds: Math.min(positive('EXPIRY_SWEEP_SECONDS', 30), 60),
    sseHeartbeatSeconds: Math.min(positive('SSE_HEARTBEAT_SECONDS', 15), 20),
    egress,
    workspaceImageVariant: imageVariant,
    egressHealthSeconds: wholeNumber('EGRESS_HEALTH_SECONDS', 60),
    egressMeterSeconds: wholeNumber('EGRESS_METER_SECONDS', 60),
    hostCheckSeconds: wholeNumber('HOST_CHECK_SECONDS', 30),
    rateLimitIpv6Prefix: ipv6Prefix(),
    metricsBind: parseAddress('METRICS_BIND', env.METRICS_BIND, problems),
    trustProxy: parseTrustProxy(env.TRUST_PROXY, problems),
    folderMounts: {
      dir: path.resolve(env.MOUNTS_DIR || '/run/cloud-cli-proxy/mounts'),
      user: mountUser,
    },
    // apps/cli/dist/ccp.mjs of this checkout, from apps/gateway/src or apps/gateway/dist.
    cliBundle: path.resolve(
      env.CLI_BUNDLE || fileURLToPath(new URL('../../cli/dist/ccp.mjs', import.meta.url)),
    ),
    workspaceLimits: {
      memoryMb: positive('WORKSPACE_MEMORY_MB', 2048),
      cpus: positiveNumber('WORKSPACE_CPUS', 1),
      pids: positive('WORKSPACE_PIDS', 1024),
    },
    node: parseNodeSettings(
      env,
      typeof database === 'string' ? { kind: 'sqlite', file: '' } : database,
      problems,
      { positive },
    ),
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

function parseNodeSettings(
  env: Env,
  database: Config['database'],
  problems: string[],
  numbers: { positive: (name: string, fallback: number) => number },
): NodeSettings {
  const name = env.NODE_NAME || 'local';
  if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(name))
    problems.push(`NODE_NAME must be lowercase letters, digits and dashes, at most 63 (got "${name}")`);
  const internalBind = parseAddress('INTERNAL_BIND', env.INTERNAL_BIND, problems);
  const internalAddress = env.INTERNAL_ADDRESS || (env.INTERNAL_BIND ? env.INTERNAL_BIND.trim() : null);
  if (env.INTERNAL_ADDRESS && !env.INTERNAL_BIND)
    problems.push(
      'INTERNAL_ADDRESS needs INTERNAL_BIND: the address others dial must be one this node listens on',
    );
  if (internalAddress && /^(0\.0\.0\.0|\[?::\]?):/.test(internalAddress))
    problems.push(
      `INTERNAL_ADDRESS must be an address other nodes can dial (got "${internalAddress}"); set it beside INTERNAL_BIND=${internalAddress}`,
    );
  if (internalBind && database.kind !== 'postgres')
    problems.push('INTERNAL_BIND needs DATABASE_URL on PostgreSQL: with SQLite there is only one node');
  const heartbeatSeconds = numbers.positive('NODE_HEARTBEAT_SECONDS', 10);
  const deadSeconds = numbers.positive('NODE_DEAD_SECONDS', 45);
  if (deadSeconds < heartbeatSeconds * 2)
    problems.push(
      `NODE_DEAD_SECONDS must be at least twice NODE_HEARTBEAT_SECONDS (${deadSeconds} < 2 × ${heartbeatSeconds})`,
    );
  return {
    name,
    maxHosts: numbers.positive('NODE_MAX_HOSTS', 50),
    heartbeatSeconds,
    deadSeconds,
    internalBind,
    internalAddress,
  };
}

function parseTrustProxy(text: string | undefined, problems: string[]): string[] {
  const entries = (text ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
  const valid = (entry: string) => {
    const [address, bits, extra] = entry.split('/');
    const family = isIP(address ?? '');
    if (!family || extra !== undefined) return false;
    if (bits === undefined) return true;
    return /^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128);
  };
  const bad = entries.filter((entry) => !valid(entry));
  if (bad.length > 0)
    problems.push(
      `TRUST_PROXY must list IP addresses or CIDR ranges separated by commas, e.g. 127.0.0.1,10.0.0.0/8 (not: ${bad.join(', ')})`,
    );
  return entries;
}

function parseAddress(
  name: string,
  text: string | undefined,
  problems: string[],
): { host: string; port: number } | null {
  if (!text) return null;
  const match = /^(.+):(\d{1,5})$/.exec(text.trim());
  const port = Number(match?.[2]);
  if (!match || port > 65535) {
    problems.push(`${name} must be an address and port such as 127.0.0.1:9464 (got "${text}")`);
    return null;
  }
  return { host: match[1]!.replace(/^\[(.*)\]$/, '$1'), port };
}

/** The egress settings alone, from variables as an operator sets them (tests and benches use this too). */
export function egressSettingsFrom(env: Env): EgressSettings {
  const problems: string[] = [];
  const settings = parseEgressSettings(env, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return settings;
}

function parseEgressSettings(env: Env, problems: string[]): EgressSettings {
  if (env.EGRESS_PROBE_DNS_SERVER) {
    problems.push(
      'EGRESS_PROBE_DNS_SERVER is no longer used: the probe answers its zone through EGRESS_PROBE_DOH_URL, and ' +
        'EGRESS_DNS_SERVER names the recursive resolver for other record types (docs/egress-probe.md)',
    );
  }
  const dohUrl = env.EGRESS_DOH_URL || EGRESS_DEFAULTS.dohUrl;
  checkDohUrl('EGRESS_DOH_URL', dohUrl, problems);

  const dnsText = env.EGRESS_DNS_SERVER || EGRESS_DEFAULTS.dnsServer;
  const dnsMatch = /^(\d{1,3}(?:\.\d{1,3}){3})(?::(\d{1,5}))?$/.exec(dnsText);
  const dnsPort = Number(dnsMatch?.[2] ?? 53);
  if (!dnsMatch || !isIPv4(dnsMatch[1]!) || dnsPort < 1 || dnsPort > 65535)
    problems.push(`EGRESS_DNS_SERVER must be an IPv4 address with an optional :port (got "${dnsText}")`);
  const dnsServer = { address: dnsMatch?.[1] ?? '0.0.0.0', port: dnsPort };

  const whoamiText = env.EGRESS_DNS_WHOAMI ?? EGRESS_DEFAULTS.dnsWhoami;
  const dnsWhoami = whoamiText === '' || whoamiText === 'off' ? null : whoamiText.replace(/\.$/, '');
  if (dnsWhoami !== null && !DNS_NAME.test(dnsWhoami))
    problems.push(`EGRESS_DNS_WHOAMI must be a DNS name, or "off" (got "${whoamiText}")`);

  let probe: EgressProbe | null = null;
  const probeUrl = env.EGRESS_PROBE_URL || null;
  if (probeUrl) {
    if (probeUrl.startsWith('http://'))
      // Plain HTTP lets the upstream answer the echo itself with the declared exit, and read the log's token.
      problems.push(
        `EGRESS_PROBE_URL must be https:// (got "${probeUrl}"): over plain HTTP the upstream can answer the probe's IP echo itself and read its token. Start the probe with --tls-cert and --tls-key and set EGRESS_PROBE_CA_FILE to its CA (docs/egress-probe.md)`,
      );
    else if (!isEchoUrl(probeUrl, true))
      // The exit-IP check must dial an IPv4 literal: a name could resolve to IPv6 and leave from another address.
      problems.push(
        `EGRESS_PROBE_URL must be an https:// URL whose host is an IPv4 address (got "${probeUrl}")`,
      );
    const dnsZone = env.EGRESS_PROBE_DNS_ZONE?.replace(/\.$/, '') ?? '';
    if (!DNS_NAME.test(dnsZone))
      problems.push("EGRESS_PROBE_DNS_ZONE must name the probe's zone when EGRESS_PROBE_URL is set");
    const probeDoh = env.EGRESS_PROBE_DOH_URL ?? '';
    if (!probeDoh)
      problems.push("EGRESS_PROBE_DOH_URL must name the probe's DoH endpoint when EGRESS_PROBE_URL is set");
    else checkDohUrl('EGRESS_PROBE_DOH_URL', probeDoh, problems);
    const probeCa = env.EGRESS_PROBE_CA_FILE || null;
    if (probeCa && !existsSync(probeCa)) problems.push(`EGRESS_PROBE_CA_FILE: no such file: ${probeCa}`);
    probe = {
      url: probeUrl,
      dnsZone: dnsZone.toLowerCase(),
      dohUrl: probeDoh,
      token: env.EGRESS_PROBE_TOKEN || null,
      caFile: probeCa,
    };
  } else {
    const stray = [
      'EGRESS_PROBE_DNS_ZONE',
      'EGRESS_PROBE_DOH_URL',
      'EGRESS_PROBE_TOKEN',
      'EGRESS_PROBE_CA_FILE',
    ].filter((name) => env[name]);
    if (stray.length > 0)
      problems.push(`${stray.join(', ')} only apply with EGRESS_PROBE_URL (the probe's IP echo)`);
  }

  // The HTTPS echoes stay beside a probe: each is one more party that must see the exit.
  const urlsText = env.EGRESS_EXIT_IP_URLS;
  const exitIpUrls = urlsText
    ? urlsText
        .split(',')
        .map((entry) => entry.trim())
        .filter(Boolean)
    : [...EGRESS_DEFAULTS.exitIpUrls];
  const badUrls = exitIpUrls.filter((entry) => !isEchoUrl(entry, false));
  if (badUrls.length > 0)
    problems.push(
      `EGRESS_EXIT_IP_URLS must list http:// or https:// URLs separated by commas (not: ${badUrls.join(', ')})`,
    );
  if (probe) exitIpUrls.unshift(probe.url);
  if (exitIpUrls.length === 0) problems.push('EGRESS_EXIT_IP_URLS must name at least one IP echo');
  const minText = env.EGRESS_EXIT_IP_MIN_ANSWERS;
  const minEchoAnswers = minText ? Number(minText) : 1;
  if (
    !Number.isInteger(minEchoAnswers) ||
    minEchoAnswers < 1 ||
    minEchoAnswers > Math.max(1, exitIpUrls.length)
  )
    problems.push(
      `EGRESS_EXIT_IP_MIN_ANSWERS must be a whole number from 1 to the number of IP echoes (${exitIpUrls.length}) (got "${minText}")`,
    );

  const caFile = env.EGRESS_TLS_CA_FILE || null;
  if (caFile && !existsSync(caFile)) problems.push(`EGRESS_TLS_CA_FILE: no such file: ${caFile}`);
  const policy = egressPolicy(env.EGRESS_POLICY, problems);
  return {
    dohUrl,
    dnsServer,
    dnsWhoami,
    exitIpUrls,
    minEchoAnswers,
    probe,
    caFile,
    v2rayCommand: env.V2RAY_BIN || 'v2ray',
    policy,
  };
}

/** EGRESS_POLICY: an EgressPolicy as JSON (docs/configuration.md), checked as the routing would take it. */
function egressPolicy(text: string | undefined, problems: string[]): EgressPolicy | null {
  if (!text) return null;
  let policy: unknown;
  try {
    policy = JSON.parse(text);
  } catch {
    problems.push('EGRESS_POLICY must be JSON: {"mode":"enforce","default_action":"allow","rules":[...]}');
    return null;
  }
  if (!Value.Check(EgressPolicy, policy)) {
    const first = Value.Errors(EgressPolicy, policy)[0];
    problems.push(
      `EGRESS_POLICY is not a policy: ${first?.instancePath || '/'} ${first?.message ?? ''}`.trim(),
    );
    return null;
  }
  try {
    v2rayPolicyRules(policy, 'check', 'check');
  } catch (error) {
    problems.push(`EGRESS_POLICY: ${(error as Error).message}`);
    return null;
  }
  return policy;
}

const DNS_NAME = /^[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,62}))*$/;

/**
 * An IP echo: http(s) with a host that is an IPv4 literal or a name (resolved through the tunnel, IPv4 only);
 * the probe's (`literalOnly`) is https:// to an IPv4 literal.
 */
function isEchoUrl(text: string, literalOnly: boolean): boolean {
  try {
    const url = new URL(text);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
    if (literalOnly) return url.protocol === 'https:' && isIPv4(url.hostname);
    return isIPv4(url.hostname) || (!url.hostname.startsWith('[') && DNS_NAME.test(url.hostname));
  } catch {
    return false;
  }
}

/** v2ray would resolve a DoH host name with its own resolver, which is the tunnel: only IP literals work. */
function checkDohUrl(name: string, text: string, problems: string[]): void {
  try {
    const url = new URL(text);
    if (url.protocol === 'https:' && isIP(url.hostname.replace(/^\[|\]$/g, '')) !== 0) return;
  } catch {
    // reported below
  }
  problems.push(`${name} must be an https:// URL whose host is an IP address (got "${text}")`);
}
