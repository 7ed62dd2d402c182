import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { parseArgs } from 'node:util';

export class ConfigError extends Error {}

export interface ListenAddress {
  host: string;
  port: number;
}

export interface ProbeConfig {
  /** HTTP: IP echo, bulk bytes, DNS log, and DoH. Undefined turns it off. */
  http: ListenAddress | undefined;
  /** HTTPS (HTTP/1.1 and HTTP/2) with the same routes; needs `tls`. */
  https: ListenAddress | undefined;
  /** Authoritative DNS over UDP and TCP on the same address and port. */
  dns: ListenAddress | undefined;
  tls: { cert: string; key: string } | undefined;
  /** Zone the DNS server is authoritative for, lower case, without the trailing dot. */
  zone: string;
  /** Address every name under the zone resolves to (A for IPv4, AAAA for IPv6). */
  answerAddress: string;
  ttl: number;
  /** When set, `/dns-log` needs `Authorization: Bearer <token>` or `?token=<token>`. */
  logToken: string | undefined;
  /** Upper bound for `/bytes/<n>`. */
  maxBytes: number;
  /** How many DNS log entries are kept; the oldest names are dropped first. */
  logLimit: number;
}

export const usage = `Usage: node apps/egress-probe/dist/main.js [options]
   or: node --import tsx apps/egress-probe/src/main.ts [options]

Every option can also be set by the environment variable named in brackets; options win.
  --http HOST:PORT      HTTP listener, "off" to disable (PROBE_HTTP, default 0.0.0.0:80)
  --https HOST:PORT     HTTPS listener, used when a certificate is given (PROBE_HTTPS, default 0.0.0.0:443)
  --dns HOST:PORT       DNS listener for UDP and TCP, "off" to disable (PROBE_DNS, default 0.0.0.0:53)
  --tls-cert FILE       PEM certificate chain for HTTPS and DoH (PROBE_TLS_CERT)
  --tls-key FILE        PEM private key (PROBE_TLS_KEY)
  --zone NAME           zone to answer for, e.g. probe.example.com (PROBE_ZONE, required with DNS)
  --answer IP           address every name in the zone resolves to (PROBE_ANSWER, required with DNS)
  --ttl SECONDS         TTL of every answer (PROBE_TTL, default 0, so resolvers ask every time)
  --log-token TOKEN     token that protects /dns-log (PROBE_LOG_TOKEN, default none)
  --max-bytes N         largest /bytes/<n> (PROBE_MAX_BYTES, default 4294967296)
  --log-limit N         DNS log entries kept (PROBE_LOG_LIMIT, default 100000)
`;

const options = {
  http: { type: 'string' },
  https: { type: 'string' },
  dns: { type: 'string' },
  'tls-cert': { type: 'string' },
  'tls-key': { type: 'string' },
  zone: { type: 'string' },
  answer: { type: 'string' },
  ttl: { type: 'string' },
  'log-token': { type: 'string' },
  'max-bytes': { type: 'string' },
  'log-limit': { type: 'string' },
  help: { type: 'boolean' },
} as const;

export function parseListen(name: string, value: string): ListenAddress | undefined {
  if (value === 'off') return undefined;
  const match = /^\[([^\]]+)\]:(\d+)$/.exec(value) ?? /^([^:]*):(\d+)$/.exec(value);
  const host = match?.[1] === '' ? '0.0.0.0' : match?.[1];
  const port = Number(match?.[2]);
  if (host === undefined || isIP(host) === 0 || !Number.isInteger(port) || port > 65535) {
    throw new ConfigError(`${name}: expected IP:PORT, [IPv6]:PORT or "off", got "${value}"`);
  }
  return { host, port };
}

function parseCount(name: string, value: string, min: number): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < min) {
    throw new ConfigError(`${name}: expected a whole number >= ${min}, got "${value}"`);
  }
  return n;
}

function readPem(name: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError(`${name}: cannot read ${path}: ${(error as Error).message}`);
  }
}

function parseFlags(argv: string[]) {
  try {
    return parseArgs({ args: argv, options, strict: true, allowPositionals: false }).values;
  } catch (error) {
    throw new ConfigError((error as Error).message);
  }
}

/** Returns undefined when `--help` was asked for. */
export function parseProbeConfig(argv: string[], env: NodeJS.ProcessEnv): ProbeConfig | undefined {
  const values = parseFlags(argv);
  if (values.help) return undefined;
  const pick = (flag: Exclude<keyof typeof options, 'help'>, variable: string, fallback?: string) =>
    values[flag] ?? env[variable] ?? fallback;

  const http = parseListen('--http', pick('http', 'PROBE_HTTP', '0.0.0.0:80')!);
  const dns = parseListen('--dns', pick('dns', 'PROBE_DNS', '0.0.0.0:53')!);
  const certFile = pick('tls-cert', 'PROBE_TLS_CERT');
  const keyFile = pick('tls-key', 'PROBE_TLS_KEY');
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new ConfigError('--tls-cert and --tls-key go together');
  }
  const tls =
    certFile !== undefined && keyFile !== undefined
      ? { cert: readPem('--tls-cert', certFile), key: readPem('--tls-key', keyFile) }
      : undefined;
  const https = tls ? parseListen('--https', pick('https', 'PROBE_HTTPS', '0.0.0.0:443')!) : undefined;
  if (!http && !https && !dns) throw new ConfigError('every listener is off; nothing to do');

  const zone = (pick('zone', 'PROBE_ZONE') ?? '').toLowerCase().replace(/\.$/, '');
  const answerAddress = pick('answer', 'PROBE_ANSWER') ?? '';
  // DoH answers from the zone too, so the zone is needed whenever DNS is served in any form.
  if (zone === '' || !/^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/.test(zone)) {
    throw new ConfigError('--zone: a DNS name is required, e.g. probe.example.com');
  }
  if (isIP(answerAddress) === 0) throw new ConfigError('--answer: an IPv4 or IPv6 address is required');

  return {
    http,
    https,
    dns,
    tls,
    zone,
    answerAddress,
    ttl: parseCount('--ttl', pick('ttl', 'PROBE_TTL', '0')!, 0),
    logToken: pick('log-token', 'PROBE_LOG_TOKEN') || undefined,
    maxBytes: parseCount('--max-bytes', pick('max-bytes', 'PROBE_MAX_BYTES', String(2 ** 32))!, 0),
    logLimit: parseCount('--log-limit', pick('log-limit', 'PROBE_LOG_LIMIT', '100000')!, 1),
  };
}
