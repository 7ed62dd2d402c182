import {
  CreateEgressIpRequest,
  type EgressIp,
  HttpProxyConfig,
  MASKED_SECRET,
  type ProxyConfig,
  type ProxyType,
  SHADOWSOCKS_METHODS,
  ShadowsocksProxyConfig,
  SocksProxyConfig,
  TrojanProxyConfig,
  VlessProxyConfig,
  VmessProxyConfig,
} from '@ccp/api';
import type { TSchema } from 'typebox';
import { type FieldErrors, validate } from '../../validation';

const SCHEMAS: Record<ProxyType, TSchema> = {
  socks: SocksProxyConfig,
  http: HttpProxyConfig,
  shadowsocks: ShadowsocksProxyConfig,
  vmess: VmessProxyConfig,
  vless: VlessProxyConfig,
  trojan: TrojanProxyConfig,
};

/** Which optional parts each protocol has; the form shows only these. */
export const PARTS: Record<
  ProxyType,
  {
    secret: 'password' | 'uuid';
    secretOptional?: boolean;
    user?: boolean;
    method?: boolean;
    security?: boolean;
    tls?: 'optional' | 'required';
    ws?: boolean;
  }
> = {
  socks: { secret: 'password', secretOptional: true, user: true },
  http: { secret: 'password', secretOptional: true, user: true, tls: 'optional' },
  shadowsocks: { secret: 'password', method: true },
  vmess: { secret: 'uuid', security: true, tls: 'optional', ws: true },
  vless: { secret: 'uuid', tls: 'optional', ws: true },
  trojan: { secret: 'password', tls: 'required', ws: true },
};

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
  const inner = validate(SCHEMAS[values.type], proxyConfig);
  for (const [key, message] of Object.entries(inner)) outer[`proxy_config.${key}`] ??= message;
  return outer;
}
