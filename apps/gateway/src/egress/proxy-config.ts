import { isIP } from 'node:net';
import {
  MASKED_SECRET,
  OutboundTls,
  PROXY_CONFIG_FIELDS,
  PROXY_SECRET_FIELDS,
  PROXY_TYPES,
  type ProxyConfig,
  type ProxyType,
  SHADOWSOCKS_METHODS,
  type ShadowsocksMethod,
  VMESS_SECURITIES,
  type VmessSecurity,
  WsTransport,
} from '@ccp/api';

export interface FieldProblem {
  field: string;
  message: string;
}

export type ProxyConfigValidation =
  | { ok: true; value: ProxyConfig }
  | { ok: false; problems: FieldProblem[] };

const ROOT = 'proxy_config';
const ENGINE = 'the tunnel engine (v2ray 4.34)';

/** sing-box outbound fields v2ray 4.34 cannot honour: named, so the admin learns why, not just "unknown". */
const UNSUPPORTED_FIELDS: Record<string, string> = {
  flow: `VLESS flow (XTLS/Vision) is not supported by ${ENGINE}`,
  multiplex: `multiplex is not supported by ${ENGINE}`,
  plugin: `SIP003 plugins are not supported by ${ENGINE}`,
  plugin_opts: `SIP003 plugins are not supported by ${ENGINE}`,
  udp_over_tcp: `udp_over_tcp is not supported by ${ENGINE}`,
  packet_encoding: `packet_encoding is not supported by ${ENGINE}`,
  authenticated_length: `authenticated_length is not supported by ${ENGINE}`,
  global_padding: `global_padding is not supported by ${ENGINE}`,
  detour: 'detour is not supported: the upstream is dialled directly',
  path: `a path for the HTTP proxy is not supported by ${ENGINE}`,
  headers: `headers for the HTTP proxy are not supported by ${ENGINE}`,
};

const TLS_FIELDS = Object.keys(OutboundTls.properties);
const UNSUPPORTED_TLS_FIELDS: Record<string, string> = {
  reality: `REALITY is not supported by ${ENGINE}`,
  utls: `uTLS fingerprints are not supported by ${ENGINE}`,
  ech: `ECH is not supported by ${ENGINE}`,
  disable_sni: `disable_sni is not supported by ${ENGINE}`,
  min_version: `min_version is not supported by ${ENGINE}`,
  max_version: `max_version is not supported by ${ENGINE}`,
  cipher_suites: `cipher_suites is not supported by ${ENGINE}`,
  certificate_path: 'certificate_path is not supported: send the PEM text in certificate',
};

const WS_FIELDS = Object.keys(WsTransport.properties);
const UNSUPPORTED_WS_FIELDS: Record<string, string> = {
  max_early_data: `WebSocket early data is not supported by ${ENGINE}`,
  early_data_header_name: `WebSocket early data is not supported by ${ENGINE}`,
};

const HOST_LABEL = /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+-----END CERTIFICATE-----/;

type JsonObject = Record<string, unknown>;

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isHostName(value: string): boolean {
  const name = value.endsWith('.') ? value.slice(0, -1) : value;
  return name.length > 0 && name.length <= 253 && name.split('.').every((label) => HOST_LABEL.test(label));
}

/** Collects every problem instead of stopping at the first, so one answer names every bad field. */
class Problems {
  readonly list: FieldProblem[] = [];

  add(field: string, message: string): void {
    this.list.push({ field, message });
  }

  /** Flags fields outside `allowed`, with the specific reason when sing-box has the field and v2ray does not. */
  checkKeys(
    object: JsonObject,
    path: string,
    allowed: readonly string[],
    unsupported: Record<string, string>,
  ) {
    for (const key of Object.keys(object)) {
      if (allowed.includes(key)) continue;
      this.add(`${path}.${key}`, Object.hasOwn(unsupported, key) ? unsupported[key]! : 'unknown field');
    }
  }

  string(object: JsonObject, path: string, key: string, required: boolean): string | undefined {
    const value = object[key];
    if (value === undefined) {
      if (required) this.add(`${path}.${key}`, 'is required');
      return undefined;
    }
    if (typeof value !== 'string' || value.length === 0) {
      this.add(`${path}.${key}`, 'must be a non-empty string');
      return undefined;
    }
    return value;
  }

  secret(object: JsonObject, path: string, key: string, required: boolean): string | undefined {
    const value = this.string(object, path, key, required);
    if (value === MASKED_SECRET) {
      this.add(`${path}.${key}`, `"${MASKED_SECRET}" is the masked placeholder; send the real value`);
      return undefined;
    }
    return value;
  }

  boolean(object: JsonObject, path: string, key: string, required: boolean): boolean | undefined {
    const value = object[key];
    if (value === undefined) {
      if (required) this.add(`${path}.${key}`, 'is required');
      return undefined;
    }
    if (typeof value !== 'boolean') {
      this.add(`${path}.${key}`, 'must be true or false');
      return undefined;
    }
    return value;
  }
}

/**
 * Checks a sing-box style outbound against what the tunnel engine can really do. Anything v2ray 4.34 would
 * ignore or mis-handle is refused here, naming the field: v2ray itself accepts some of them silently.
 */
export function validateProxyConfig(input: unknown): ProxyConfigValidation {
  const problems = new Problems();
  if (!isObject(input)) {
    problems.add(ROOT, 'must be an object');
    return { ok: false, problems: problems.list };
  }
  const type = checkType(input.type, problems);
  const server = checkServer(input.server, problems);
  const serverPort = checkPort(input.server_port, problems);
  if (type === undefined) {
    return { ok: false, problems: problems.list };
  }
  problems.checkKeys(input, ROOT, PROXY_CONFIG_FIELDS[type].fields, UNSUPPORTED_FIELDS);
  const value = checkTypeFields(type, input, problems);
  if (problems.list.length > 0 || value === undefined || server === undefined || serverPort === undefined) {
    return { ok: false, problems: problems.list };
  }
  return { ok: true, value: { ...value, server, server_port: serverPort } as ProxyConfig };
}

function checkType(value: unknown, problems: Problems): ProxyType | undefined {
  if (value === undefined) {
    problems.add(`${ROOT}.type`, 'is required');
  } else if (typeof value !== 'string' || !(PROXY_TYPES as readonly string[]).includes(value)) {
    problems.add(`${ROOT}.type`, `must be one of ${PROXY_TYPES.join(', ')}`);
  } else {
    return value as ProxyType;
  }
  return undefined;
}

function checkServer(value: unknown, problems: Problems): string | undefined {
  if (value === undefined) {
    problems.add(`${ROOT}.server`, 'is required');
  } else if (typeof value !== 'string' || (isIP(value) === 0 && !isHostName(value))) {
    problems.add(`${ROOT}.server`, 'must be a host name or an IP address');
  } else {
    return value;
  }
  return undefined;
}

function checkPort(value: unknown, problems: Problems): number | undefined {
  if (value === undefined) {
    problems.add(`${ROOT}.server_port`, 'is required');
  } else if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > 65535) {
    problems.add(`${ROOT}.server_port`, 'must be an integer from 1 to 65535');
  } else {
    return value as number;
  }
  return undefined;
}

/** One config type's own fields; the shared `server` and `server_port` are checked first. */
type TypeFields = ProxyConfig extends infer Config
  ? Config extends ProxyConfig
    ? Omit<Config, 'server' | 'server_port'>
    : never
  : never;

function checkTypeFields(type: ProxyType, input: JsonObject, problems: Problems): TypeFields | undefined {
  switch (type) {
    case 'socks':
      return checkSocks(input, problems);
    case 'http':
      return checkHttp(input, problems);
    case 'shadowsocks':
      return checkShadowsocks(input, problems);
    case 'vmess':
      return checkVmess(input, problems);
    case 'vless':
      return checkVless(input, problems);
    case 'trojan':
      return checkTrojan(input, problems);
  }
}

function checkCredentials(input: JsonObject, problems: Problems) {
  const username = problems.string(input, ROOT, 'username', false);
  const password = problems.secret(input, ROOT, 'password', false);
  if ((input.username === undefined) !== (input.password === undefined)) {
    const missing = input.username === undefined ? 'username' : 'password';
    problems.add(`${ROOT}.${missing}`, 'username and password must be given together');
  }
  return username !== undefined && password !== undefined ? { username, password } : {};
}

function checkSocks(input: JsonObject, problems: Problems): TypeFields {
  if (input.version !== undefined && input.version !== '5') {
    problems.add(
      `${ROOT}.version`,
      input.version === '4' || input.version === '4a'
        ? `SOCKS4/4a is not supported by ${ENGINE}; use version "5"`
        : 'must be "5"',
    );
  }
  const credentials = checkCredentials(input, problems);
  for (const [key, value] of Object.entries(credentials)) {
    if (Buffer.byteLength(value) > 255)
      problems.add(`${ROOT}.${key}`, 'must be at most 255 bytes (RFC 1929)');
  }
  return { type: 'socks', ...(input.version === '5' ? { version: '5' } : {}), ...credentials };
}

function checkHttp(input: JsonObject, problems: Problems): TypeFields {
  const credentials = checkCredentials(input, problems);
  if (credentials.username?.includes(':')) {
    problems.add(`${ROOT}.username`, 'must not contain ":" (HTTP Basic authentication)');
  }
  const tls = input.tls === undefined ? undefined : checkTls(input.tls, problems, false);
  return { type: 'http', ...credentials, ...(tls ? { tls } : {}) };
}

function checkShadowsocks(input: JsonObject, problems: Problems): TypeFields | undefined {
  const method = problems.string(input, ROOT, 'method', true);
  const password = problems.secret(input, ROOT, 'password', true);
  if (method === undefined) return undefined;
  if (!(SHADOWSOCKS_METHODS as readonly string[]).includes(method)) {
    problems.add(
      `${ROOT}.method`,
      method.startsWith('2022-blake3-')
        ? `Shadowsocks-2022 methods are not supported by ${ENGINE}`
        : `"${method}" is not supported by ${ENGINE}; use one of the AEAD ciphers ${SHADOWSOCKS_METHODS.join(', ')}`,
    );
    return undefined;
  }
  return password === undefined
    ? undefined
    : { type: 'shadowsocks', method: method as ShadowsocksMethod, password };
}

function checkUuid(input: JsonObject, problems: Problems): string | undefined {
  const uuid = problems.secret(input, ROOT, 'uuid', true);
  if (uuid !== undefined && !UUID.test(uuid)) {
    problems.add(`${ROOT}.uuid`, 'must be a UUID');
    return undefined;
  }
  return uuid;
}

/** Optional TLS and WebSocket parts shared by vmess, vless and trojan. */
function checkStream(input: JsonObject, problems: Problems, tlsRequired: boolean) {
  let tls: OutboundTls | undefined;
  if (input.tls !== undefined) {
    tls = checkTls(input.tls, problems, tlsRequired);
  } else if (tlsRequired) {
    problems.add(`${ROOT}.tls`, 'is required: trojan always runs over TLS');
  }
  const transport = input.transport === undefined ? undefined : checkTransport(input.transport, problems);
  return { ...(tls ? { tls } : {}), ...(transport ? { transport } : {}) };
}

function checkVmess(input: JsonObject, problems: Problems): TypeFields | undefined {
  const uuid = checkUuid(input, problems);
  let security: VmessSecurity | undefined;
  if (input.security !== undefined) {
    if (input.security === 'aes-128-ctr') {
      problems.add(
        `${ROOT}.security`,
        `aes-128-ctr is not supported by ${ENGINE} (it would fall back to auto)`,
      );
    } else if (!(VMESS_SECURITIES as readonly unknown[]).includes(input.security)) {
      problems.add(`${ROOT}.security`, `must be one of ${VMESS_SECURITIES.join(', ')}`);
    } else {
      security = input.security as VmessSecurity;
    }
  }
  const alterId = input.alter_id;
  if (
    alterId !== undefined &&
    (!Number.isInteger(alterId) || (alterId as number) < 0 || (alterId as number) > 65535)
  ) {
    problems.add(`${ROOT}.alter_id`, 'must be an integer from 0 to 65535');
  }
  const stream = checkStream(input, problems, false);
  if (uuid === undefined) return undefined;
  return {
    type: 'vmess',
    uuid,
    ...(security ? { security } : {}),
    ...(alterId !== undefined ? { alter_id: alterId as number } : {}),
    ...stream,
  };
}

function checkVless(input: JsonObject, problems: Problems): TypeFields | undefined {
  const uuid = checkUuid(input, problems);
  const stream = checkStream(input, problems, false);
  return uuid === undefined ? undefined : { type: 'vless', uuid, ...stream };
}

function checkTrojan(input: JsonObject, problems: Problems): TypeFields | undefined {
  const password = problems.secret(input, ROOT, 'password', true);
  const stream = checkStream(input, problems, true);
  const { tls } = stream;
  return password === undefined || tls === undefined
    ? undefined
    : { type: 'trojan', password, ...stream, tls };
}

function checkTls(input: unknown, problems: Problems, required: boolean): OutboundTls | undefined {
  const path = `${ROOT}.tls`;
  if (!isObject(input)) {
    problems.add(path, 'must be an object');
    return undefined;
  }
  problems.checkKeys(input, path, TLS_FIELDS, UNSUPPORTED_TLS_FIELDS);
  const enabled = problems.boolean(input, path, 'enabled', true);
  if (required && enabled === false)
    problems.add(`${path}.enabled`, 'must be true: trojan always runs over TLS');
  const serverName = problems.string(input, path, 'server_name', false);
  if (serverName !== undefined && isIP(serverName) === 0 && !isHostName(serverName)) {
    problems.add(`${path}.server_name`, 'must be a host name or an IP address');
  }
  const insecure = problems.boolean(input, path, 'insecure', false);
  const alpn = input.alpn;
  if (
    alpn !== undefined &&
    (!Array.isArray(alpn) || !alpn.every((protocol) => typeof protocol === 'string' && protocol.length > 0))
  ) {
    problems.add(`${path}.alpn`, 'must be a list of protocol names');
  }
  const certificate = input.certificate;
  const pem = Array.isArray(certificate) ? certificate.join('\n') : certificate;
  if (
    certificate !== undefined &&
    (typeof pem !== 'string' ||
      (Array.isArray(certificate) && !certificate.every((line) => typeof line === 'string')) ||
      !PEM_CERTIFICATE.test(pem))
  ) {
    problems.add(`${path}.certificate`, 'must be a PEM certificate (text or list of lines)');
  }
  if (enabled === undefined) return undefined;
  return {
    enabled,
    ...(serverName !== undefined ? { server_name: serverName } : {}),
    ...(insecure !== undefined ? { insecure } : {}),
    ...(alpn !== undefined ? { alpn: alpn as string[] } : {}),
    ...(certificate !== undefined ? { certificate: certificate as string | string[] } : {}),
  };
}

function checkTransport(input: unknown, problems: Problems): WsTransport | undefined {
  const path = `${ROOT}.transport`;
  if (!isObject(input)) {
    problems.add(path, 'must be an object');
    return undefined;
  }
  const type = input.type;
  if (type !== 'ws') {
    problems.add(
      `${path}.type`,
      typeof type === 'string' && ['grpc', 'http', 'quic', 'httpupgrade'].includes(type)
        ? `the ${type} transport is not supported by ${ENGINE}; only ws is`
        : 'must be "ws"',
    );
    return undefined;
  }
  problems.checkKeys(input, path, WS_FIELDS, UNSUPPORTED_WS_FIELDS);
  const wsPath = problems.string(input, path, 'path', false);
  if (wsPath !== undefined && !wsPath.startsWith('/')) problems.add(`${path}.path`, 'must start with /');
  const headers = input.headers;
  if (headers !== undefined) {
    if (!isObject(headers)) {
      problems.add(`${path}.headers`, 'must be an object of header names to values');
    } else {
      for (const [name, value] of Object.entries(headers)) {
        if (!HEADER_NAME.test(name)) problems.add(`${path}.headers.${name}`, 'is not a valid header name');
        else if (typeof value !== 'string' || /[\r\n]/.test(value)) {
          problems.add(`${path}.headers.${name}`, 'must be a single-line string');
        }
      }
    }
  }
  return {
    type: 'ws',
    ...(wsPath !== undefined ? { path: wsPath } : {}),
    ...(isObject(headers) ? { headers: headers as Record<string, string> } : {}),
  };
}

/** The config as the API shows it: every secret replaced by the mask, nothing else changed. */
export function maskProxyConfig(config: ProxyConfig): ProxyConfig {
  const masked: JsonObject = { ...config };
  for (const field of PROXY_SECRET_FIELDS) {
    if (typeof masked[field] === 'string') masked[field] = MASKED_SECRET;
  }
  return masked as ProxyConfig;
}

export type MaskedSecretsMerge = { ok: true; value: unknown } | { ok: false; problems: FieldProblem[] };

/** What says where a secret goes: with any of them changed, a stored secret must not follow. */
const UPSTREAM_FIELDS = ['type', 'server', 'server_port'] as const;

/**
 * For an update: a secret sent back as the mask means "keep what is stored", but only for the same upstream;
 * otherwise whoever may edit the config could point it at their own server and have the egress test hand the
 * secret over. Runs before validation; a mask with nothing stored behind it stays and validation rejects it.
 */
export function mergeMaskedSecrets(incoming: unknown, stored: ProxyConfig): MaskedSecretsMerge {
  if (!isObject(incoming)) return { ok: true, value: incoming };
  const merged: JsonObject = { ...incoming };
  const kept: JsonObject = stored;
  const changed = UPSTREAM_FIELDS.filter((field) => incoming[field] !== kept[field]);
  const problems = new Problems();
  for (const field of PROXY_SECRET_FIELDS) {
    if (merged[field] !== MASKED_SECRET || typeof kept[field] !== 'string') continue;
    if (changed.length === 0) {
      merged[field] = kept[field];
      continue;
    }
    problems.add(
      `${ROOT}.${field}`,
      `"${MASKED_SECRET}" keeps the stored value only for the same upstream, and ${changed.join(', ')} changed: ` +
        'send the secret again when the server changes',
    );
  }
  return problems.list.length === 0 ? { ok: true, value: merged } : { ok: false, problems: problems.list };
}
