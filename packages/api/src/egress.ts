import Type from 'typebox';
import { ErrorBody, Timestamp, Uuid } from './common.js';

/**
 * What every secret in `proxy_config` (`password`, `uuid`) reads as in responses; sent back, it keeps the secret
 * while `type`, `server` and `server_port` stay as stored.
 */
export const MASKED_SECRET = '********';

/** The AEAD ciphers the tunnel engine (v2ray 4.34) can speak; `chacha20-poly1305` is its name for the IETF variant. */
export const SHADOWSOCKS_METHODS = [
  'aes-128-gcm',
  'aes-256-gcm',
  'chacha20-poly1305',
  'chacha20-ietf-poly1305',
] as const;

export const VMESS_SECURITIES = ['auto', 'none', 'zero', 'aes-128-gcm', 'chacha20-poly1305'] as const;

const Server = Type.String({
  minLength: 1,
  maxLength: 253,
  description: 'Host name or IP address of the upstream',
});
const ServerPort = Type.Integer({ minimum: 1, maximum: 65535 });
/**
 * `x-secret` marks the field for the gateway (which masks it) and the dashboard (which asks for it and never
 * shows it): both read the mark here instead of a list of their own.
 */
const Secret = (description: string) =>
  Type.String({
    minLength: 1,
    description: `${description}; "${MASKED_SECRET}" in responses`,
    'x-secret': true,
  });

export const OutboundTls = Type.Object(
  {
    enabled: Type.Boolean(),
    server_name: Type.Optional(
      Type.String({ description: 'SNI and certificate name; defaults to `server`' }),
    ),
    insecure: Type.Optional(Type.Boolean({ description: 'Skip certificate verification' })),
    alpn: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
    certificate: Type.Optional(
      Type.Union([Type.String(), Type.Array(Type.String())], {
        description: 'PEM certificate(s) trusted in addition to the system roots',
      }),
    ),
  },
  { additionalProperties: false },
);

export const WsTransport = Type.Object(
  {
    type: Type.Literal('ws'),
    path: Type.Optional(Type.String({ description: 'HTTP path, starting with /' })),
    headers: Type.Optional(
      Type.Record(Type.String(), Type.String(), { description: 'Request headers, e.g. Host' }),
    ),
  },
  { additionalProperties: false },
);

const base = { server: Server, server_port: ServerPort };

export const SocksProxyConfig = Type.Object(
  {
    type: Type.Literal('socks'),
    ...base,
    version: Type.Optional(Type.Literal('5')),
    username: Type.Optional(Type.String({ minLength: 1 })),
    password: Type.Optional(Secret('SOCKS5 password')),
  },
  { additionalProperties: false },
);

export const HttpProxyConfig = Type.Object(
  {
    type: Type.Literal('http'),
    ...base,
    username: Type.Optional(Type.String({ minLength: 1 })),
    password: Type.Optional(Secret('Basic auth password')),
    tls: Type.Optional(OutboundTls),
  },
  { additionalProperties: false },
);

export const ShadowsocksProxyConfig = Type.Object(
  {
    type: Type.Literal('shadowsocks'),
    ...base,
    method: Type.Enum(SHADOWSOCKS_METHODS),
    password: Secret('Shadowsocks password'),
  },
  { additionalProperties: false },
);

export const VmessProxyConfig = Type.Object(
  {
    type: Type.Literal('vmess'),
    ...base,
    uuid: Secret('VMess user id (a UUID)'),
    security: Type.Optional(Type.Enum(VMESS_SECURITIES, { description: 'Defaults to auto' })),
    alter_id: Type.Optional(
      Type.Integer({ minimum: 0, maximum: 65535, description: 'Defaults to 0 (AEAD header)' }),
    ),
    tls: Type.Optional(OutboundTls),
    transport: Type.Optional(WsTransport),
  },
  { additionalProperties: false },
);

export const VlessProxyConfig = Type.Object(
  {
    type: Type.Literal('vless'),
    ...base,
    uuid: Secret('VLESS user id (a UUID)'),
    tls: Type.Optional(OutboundTls),
    transport: Type.Optional(WsTransport),
  },
  { additionalProperties: false },
);

export const TrojanProxyConfig = Type.Object(
  {
    type: Type.Literal('trojan'),
    ...base,
    password: Secret('Trojan password'),
    tls: OutboundTls,
    transport: Type.Optional(WsTransport),
  },
  { additionalProperties: false },
);

/** An upstream in sing-box outbound format, limited to what the tunnel engine can carry. */
export const ProxyConfig = Type.Union([
  SocksProxyConfig,
  HttpProxyConfig,
  ShadowsocksProxyConfig,
  VmessProxyConfig,
  VlessProxyConfig,
  TrojanProxyConfig,
]);

type ProxyConfigSchema = (typeof ProxyConfig.anyOf)[number];

export type ProxyType = ProxyConfigSchema['properties']['type']['const'];

/** Every protocol, in the order of the union above. */
export const PROXY_TYPES: readonly ProxyType[] = ProxyConfig.anyOf.map(
  (schema) => schema.properties.type.const,
);

/** Each protocol's own schema, by its `type`. */
export const PROXY_CONFIG_SCHEMAS = Object.fromEntries(
  ProxyConfig.anyOf.map((schema) => [schema.properties.type.const, schema]),
) as Record<ProxyType, ProxyConfigSchema>;

/** The fields of one protocol's `proxy_config`, read off its schema. */
export interface ProxyConfigFields {
  /** Every field it may have, `type`, `server` and `server_port` included. */
  fields: readonly string[];
  required: readonly string[];
  /** The field holding its secret: each protocol has one. */
  secret: string;
}

function fieldsOf(schema: ProxyConfigSchema): ProxyConfigFields {
  const properties: Record<string, object> = schema.properties;
  const secrets = Object.keys(properties).filter((key) => 'x-secret' in properties[key]!);
  if (secrets.length !== 1) throw new Error(`${schema.properties.type.const} must have exactly one secret`);
  return { fields: Object.keys(properties), required: schema.required ?? [], secret: secrets[0]! };
}

export const PROXY_CONFIG_FIELDS = Object.fromEntries(
  PROXY_TYPES.map((type) => [type, fieldsOf(PROXY_CONFIG_SCHEMAS[type])]),
) as Record<ProxyType, ProxyConfigFields>;

/** Every field that holds a secret in some protocol: masked in responses, kept on update when sent back masked. */
export const PROXY_SECRET_FIELDS: readonly string[] = [
  ...new Set(PROXY_TYPES.map((type) => PROXY_CONFIG_FIELDS[type].secret)),
];

/**
 * Requests accept any object here: the gateway validates it field by field so every problem is reported with
 * its path (`proxy_config.tls.reality`), instead of the first mismatch of a six-way union.
 */
const ProxyConfigInput = Type.Object(
  { type: Type.String({ description: `One of ${PROXY_TYPES.join(', ')}` }) },
  {
    additionalProperties: true,
    description:
      "sing-box outbound object: `type` and that type's fields, one form per type as an egress IP's " +
      '`proxy_config` in the responses shows them (docs/api-reference.md: "Forms of `proxy_config`")',
  },
);

const Label = Type.String({ minLength: 1, maxLength: 100 });
const IpAddress = Type.Union([Type.String({ format: 'ipv4' }), Type.String({ format: 'ipv6' })], {
  description: 'Declared exit IP (IPv4 or IPv6); the egress test compares the real exit IP to it',
});
const TunnelType = Type.Literal('proxy');
const Provider = Type.Literal('manual');

const CheckError = Type.Union([Type.String(), Type.Null()], {
  description: '"timeout" or what failed; null on success',
});

export const EgressTestResult = Type.Object({
  ok: Type.Boolean({ description: 'true only when all three checks pass' }),
  tested_at: Timestamp,
  duration_ms: Type.Integer({ minimum: 0 }),
  checks: Type.Object({
    connectivity: Type.Object({
      ok: Type.Boolean(),
      latency_ms: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]),
      error: CheckError,
    }),
    exit_ip: Type.Object({
      ok: Type.Boolean(),
      expected: Type.String({ description: 'The declared ip_address' }),
      observed: Type.Union([Type.String(), Type.Null()], { description: 'Exit IP seen by the probe' }),
      error: CheckError,
    }),
    dns_leak: Type.Object({
      ok: Type.Boolean(),
      resolver_ip: Type.Union([Type.String(), Type.Null()], {
        description: 'Address the probe DNS server saw the query come from',
      }),
      error: CheckError,
    }),
  }),
});

export const EgressIp = Type.Object({
  id: Uuid,
  label: Type.String(),
  ip_address: Type.String(),
  tunnel_type: TunnelType,
  provider: Type.String(),
  proxy_config: ProxyConfig,
  bound_host_ids: Type.Array(Uuid),
  last_test: Type.Union([EgressTestResult, Type.Null()]),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const CreateEgressIpRequest = Type.Object(
  {
    label: Label,
    ip_address: IpAddress,
    tunnel_type: Type.Optional(TunnelType),
    provider: Type.Optional(Provider),
    proxy_config: ProxyConfigInput,
  },
  { additionalProperties: false },
);

export const UpdateEgressIpRequest = Type.Object(
  {
    label: Type.Optional(Label),
    ip_address: Type.Optional(IpAddress),
    provider: Type.Optional(Provider),
    proxy_config: Type.Optional(ProxyConfigInput),
  },
  { additionalProperties: false },
);

export const EgressIpList = Type.Object({ egress_ips: Type.Array(EgressIp) });

/** 422 `egress_test_failed`: an update whose new upstream failed its test; nothing was stored. */
export const EgressTestFailedError = Type.Object({
  ...ErrorBody.properties,
  test_result: EgressTestResult,
  host_ids: Type.Array(Uuid, { description: 'The running hosts that keep the current upstream' }),
});

export type ShadowsocksMethod = (typeof SHADOWSOCKS_METHODS)[number];
export type VmessSecurity = (typeof VMESS_SECURITIES)[number];
export type OutboundTls = Type.Static<typeof OutboundTls>;
export type WsTransport = Type.Static<typeof WsTransport>;
export type SocksProxyConfig = Type.Static<typeof SocksProxyConfig>;
export type HttpProxyConfig = Type.Static<typeof HttpProxyConfig>;
export type ShadowsocksProxyConfig = Type.Static<typeof ShadowsocksProxyConfig>;
export type VmessProxyConfig = Type.Static<typeof VmessProxyConfig>;
export type VlessProxyConfig = Type.Static<typeof VlessProxyConfig>;
export type TrojanProxyConfig = Type.Static<typeof TrojanProxyConfig>;
export type ProxyConfig = Type.Static<typeof ProxyConfig>;
export type EgressTestResult = Type.Static<typeof EgressTestResult>;
export type EgressIp = Type.Static<typeof EgressIp>;
export type CreateEgressIpRequest = Type.Static<typeof CreateEgressIpRequest>;
export type UpdateEgressIpRequest = Type.Static<typeof UpdateEgressIpRequest>;
export type EgressIpList = Type.Static<typeof EgressIpList>;
export type EgressTestFailedError = Type.Static<typeof EgressTestFailedError>;
