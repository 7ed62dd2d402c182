import {
  CreateEgressIpRequest,
  type EgressIp,
  MASKED_SECRET,
  PROXY_CONFIG_FIELDS,
  PROXY_CONFIG_SCHEMAS,
  PROXY_TYPES,
  type ProxyConfig,
  type ProxyType,
  SHADOWSOCKS_METHODS,
} from '@ccp/api';
import { type FieldErrors, validate } from '../../validation';

/** Which optional parts a protocol has; the form shows only these. */
export interface FormParts {
  secret: string;
  secretOptional: boolean;
  user: boolean;
  method: boolean;
  security: boolean;
  tls: 'optional' | 'required' | null;
  ws: boolean;
}

/** A protocol's parts, read off its schema. */
function partsOf(type: ProxyType): FormParts {
  const { fields, required, secret } = PROXY_CONFIG_FIELDS[type];
  const has = (field: string) => fields.includes(field);
  let tls: FormParts['tls'] = null;
  if (has('tls')) tls = required.includes('tls') ? 'required' : 'optional';
  return {
    secret,
    secretOptional: !required.includes(secret),
    user: has('username'),
    method: has('method'),
    security: has('security'),
    tls,
    ws: has('transport'),
  };
}

export const PARTS = Object.fromEntries(PROXY_TYPES.map((type) => [type, partsOf(type)])) as Record<
  ProxyType,
  FormParts
>;

export interface EgressFormValues {
  label: string;
  ip_address: string;
  type: ProxyType;
  server: string;
  server_port: string;
  username: string;
  /** Write-only: never filled from the API; empty while editing keeps the stored secret. */
  secret: string;
  method: string;
  security: string;
  tls: boolean;
  tls_server_name: string;
  tls_insecure: boolean;
  ws: boolean;
  ws_path: string;
  ws_host: string;
}

export function initialValues(existing?: EgressIp): EgressFormValues {
  const config = existing?.proxy_config as Record<string, unknown> | undefined;
  const tls = config?.tls as { enabled?: boolean; server_name?: string; insecure?: boolean } | undefined;
  const transport = config?.transport as { path?: string; headers?: Record<string, string> } | undefined;
  const text = (value: unknown) => (value === undefined || value === null ? '' : String(value));
  return {
    label: existing?.label ?? '',
    ip_address: existing?.ip_address ?? '',
    type: (config?.type as ProxyType | undefined) ?? 'socks',
    server: text(config?.server),
    server_port: text(config?.server_port),
    username: text(config?.username),
    secret: '',
    method: text(config?.method) || SHADOWSOCKS_METHODS[0],
    security: text(config?.security) || 'auto',
    tls: tls?.enabled ?? false,
    tls_server_name: text(tls?.server_name),
    tls_insecure: tls?.insecure ?? false,
    ws: transport !== undefined,
    ws_path: text(transport?.path),
    ws_host: text(transport?.headers?.Host),
  };
}

/** The sing-box outbound for the chosen protocol, holding that protocol's fields only. */
export function toProxyConfig(values: EgressFormValues, editing: boolean): ProxyConfig {
  const parts = PARTS[values.type];
  const config: Record<string, unknown> = {
    type: values.type,
    server: values.server.trim(),
    server_port: values.server_port.trim() === '' ? undefined : Number(values.server_port),
  };
  if (parts.user && values.username.trim()) config.username = values.username.trim();
  const secret = values.secret || (editing ? MASKED_SECRET : '');
  if (secret || !parts.secretOptional) config[parts.secret] = secret;
  if (parts.method) config.method = values.method;
  if (parts.security && values.security !== 'auto') config.security = values.security;
  if (parts.tls === 'required' || (parts.tls && values.tls)) {
    config.tls = {
      enabled: true,
      ...(values.tls_server_name.trim() ? { server_name: values.tls_server_name.trim() } : {}),
      ...(values.tls_insecure ? { insecure: true } : {}),
    };
  }
  if (parts.ws && values.ws) {
    config.transport = {
      type: 'ws',
      ...(values.ws_path.trim() ? { path: values.ws_path.trim() } : {}),
      ...(values.ws_host.trim() ? { headers: { Host: values.ws_host.trim() } } : {}),
    };
  }
  return JSON.parse(JSON.stringify(config)) as ProxyConfig;
}

/** Local checks of the whole request: the outer fields and the protocol's own schema. */
export function validateEgress(values: EgressFormValues, editing: boolean): FieldErrors {
  const proxyConfig = toProxyConfig(values, editing);
  const outer = validate(CreateEgressIpRequest, {
    label: values.label,
    ip_address: values.ip_address.trim(),
    proxy_config: proxyConfig,
  });
  const inner = validate(PROXY_CONFIG_SCHEMAS[values.type], proxyConfig);
  for (const [key, message] of Object.entries(inner)) outer[`proxy_config.${key}`] ??= message;
  return outer;
}
