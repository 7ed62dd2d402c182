import { isIP } from 'node:net';
import Type, { type Static } from 'typebox';
import { defineFormat, hostPort, port, positiveWhole } from '../shared/settings.js';

/** The HTTP side's variables (docs/configuration.md is written from them). */
export const HttpVariables = Type.Object({
  HTTP_HOST: Type.String({
    default: '0.0.0.0',
    description: 'Address of the HTTP API, the dashboard and the entry links',
  }),
  HTTP_PORT: port(8080, 'Port of the HTTP API (`0` picks a free port)', true),
  ENTRY_PORT: port(80, 'Port of the entry short link listener; `0` turns it off', true),
  DASHBOARD_PORT: port(
    0,
    'A second port serving the dashboard (and the API it calls); `0` turns it off',
    true,
  ),
  PUBLIC_HOST: Type.String({
    default: 'localhost',
    description: 'Host name users reach the gateway by',
  }),
  PUBLIC_API_URL: Type.Optional(
    Type.String({
      format: 'http-url',
      defaultText: '`http://$PUBLIC_HOST:$HTTP_PORT`',
      description:
        'Base URL written into scripts and links; shares are served on its host name (`SHARE_PORTS`)',
      problem: 'must be an http:// or https:// URL (got "{got}")',
    }),
  ),
  PUBLIC_ENTRY_URL: Type.Optional(
    Type.String({
      format: 'http-url',
      defaultText:
        '`PUBLIC_API_URL` when it is https, else `http://$PUBLIC_HOST` (with `:$ENTRY_PORT` unless 80)',
      description:
        'Base of the entry short links; https when `PUBLIC_API_URL` is (the access command pipes the script to `sh`)',
      problem: 'must be an http:// or https:// URL (got "{got}")',
    }),
  ),
  TRUST_PROXY: Type.Array(Type.String({ format: 'ip-or-cidr' }), {
    default: [],
    description:
      'Reverse proxies whose `X-Forwarded-For` gives the client address (rate limits, event log); never a range clients reach directly',
    problem:
      'must list IP addresses or CIDR ranges separated by commas, e.g. 127.0.0.1,10.0.0.0/8 (not: {bad})',
  }),
  METRICS_BIND: hostPort(
    '`host:port` serving `GET /metrics` without a token; admins always get it on `HTTP_PORT`',
  ),
  SSE_HEARTBEAT_SECONDS: positiveWhole(
    15,
    'Comment heartbeat interval on SSE streams, in seconds (at most 20)',
  ),
  CLI_BUNDLE: Type.Optional(
    Type.String({
      defaultText: '`apps/cli/dist/ccp.mjs` of this checkout',
      description: "The CLI's one-file bundle, served at `/v1/cli/ccp.mjs`",
    }),
  ),
});
export type HttpVariables = Static<typeof HttpVariables>;

defineFormat('http-url', 'http:// or https:// URL', (text) => {
  try {
    return ['http:', 'https:'].includes(new URL(text).protocol);
  } catch {
    return false;
  }
});

defineFormat('ip-or-cidr', 'IP address or CIDR range', (entry) => {
  const [address, bits, extra] = entry.split('/');
  const family = isIP(address ?? '');
  if (!family || extra !== undefined) return false;
  if (bits === undefined) return true;
  return /^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128);
});

/** The settings the HTTP layer reads itself (config.ts composes them into the gateway's Config). */
export interface HttpSettings {
  /** Where clients reach the API (PUBLIC_API_URL): the entry port names it, desktop cookies are Secure if https. */
  publicApiUrl: string;
  /** Addresses or CIDR ranges of reverse proxies whose X-Forwarded-For is believed (TRUST_PROXY); empty: none. */
  trustProxy: string[];
}
