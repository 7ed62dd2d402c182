import { existsSync } from 'node:fs';
import { isIP, isIPv4 } from 'node:net';
import { EgressPolicy } from '@ccp/api';
import Type, { type Static } from 'typebox';
import Value from 'typebox/value';
import { defineFormat, positiveWhole, wholeNumber } from '../shared/settings.js';
import { v2rayPolicyRules } from './v2ray-policy.js';

/** The public defaults (docs/egress-probe.md says what each proves). */
export const EGRESS_DEFAULTS = {
  dohUrl: 'https://1.1.1.1/dns-query',
  dnsServer: '1.1.1.1:53',
  dnsWhoami: 'whoami.cloudflare',
  exitIpUrls: ['https://1.1.1.1/cdn-cgi/trace', 'https://checkip.amazonaws.com/'],
} as const;

/** How hosts' traffic is resolved and verified (docs/configuration.md is written from these). */
export const EgressVariables = Type.Object({
  EGRESS_PROBE_DNS_SERVER: Type.Optional(
    Type.String({
      maxLength: 0,
      typeText: 'retired',
      description:
        'No longer used: `EGRESS_PROBE_DOH_URL` and `EGRESS_DNS_SERVER` replace it; set, it is refused',
      problem:
        'is no longer used: the probe answers its zone through EGRESS_PROBE_DOH_URL, and EGRESS_DNS_SERVER names the recursive resolver for other record types (docs/egress-probe.md)',
    }),
  ),
  EGRESS_DOH_URL: Type.String({
    format: 'doh-url',
    default: EGRESS_DEFAULTS.dohUrl,
    description:
      "The tunnel's resolver for A/AAAA (DoH through the upstream; host an IP address); see egress-probe.md",
    problem: 'must be an https:// URL whose host is an IP address (got "{got}")',
  }),
  EGRESS_DNS_SERVER: Type.String({
    format: 'ipv4-port',
    default: EGRESS_DEFAULTS.dnsServer,
    description: "The tunnel's resolver for other record types (TCP through the upstream)",
    problem: 'must be an IPv4 address with an optional :port (got "{got}")',
  }),
  EGRESS_DNS_WHOAMI: Type.String({
    format: 'dns-name-or-off',
    default: EGRESS_DEFAULTS.dnsWhoami,
    keepsEmpty: true,
    description:
      "CH TXT name a resolver answers with the asker's address: the DNS path check over DoH and the tunnel's DNS; `off` turns it off",
    problem: 'must be a DNS name, or "off" (got "{got}")',
  }),
  EGRESS_EXIT_IP_URLS: Type.Array(Type.String({ format: 'echo-url' }), {
    default: [...EGRESS_DEFAULTS.exitIpUrls],
    description:
      "IP echoes asked through the upstream; each that answers must see the declared exit (with a probe, beside the probe's echo)",
    problem: 'must list http:// or https:// URLs separated by commas (not: {bad})',
  }),
  EGRESS_EXIT_IP_MIN_ANSWERS: Type.Integer({
    minimum: 1,
    default: 1,
    description:
      'How many IP echoes must answer for a start, a switch or an egress test to pass; one that does not is named in `host.started`',
    problem: 'must be a whole number from 1 to the number of IP echoes (got "{got}")',
  }),
  EGRESS_PROBE_URL: Type.Optional(
    Type.String({
      typeText: 'https:// URL, host an IPv4 literal',
      description: "Your own egress probe's IP echo (see egress-probe.md); unset: public endpoints only",
    }),
  ),
  EGRESS_PROBE_DNS_ZONE: Type.Optional(
    Type.String({ typeText: 'DNS name', description: "The probe's DNS zone, with `EGRESS_PROBE_URL`" }),
  ),
  EGRESS_PROBE_DOH_URL: Type.Optional(
    Type.String({
      typeText: 'https:// URL, host an IP literal',
      description: "The probe's DoH endpoint, with `EGRESS_PROBE_URL`",
    }),
  ),
  EGRESS_PROBE_TOKEN: Type.Optional(
    Type.String({ secret: true, description: "The token of the probe's DNS log, with `EGRESS_PROBE_URL`" }),
  ),
  EGRESS_PROBE_CA_FILE: Type.Optional(
    Type.String({
      typeText: 'file',
      description: "The probe's CA, pinned for it, with `EGRESS_PROBE_URL`",
    }),
  ),
  EGRESS_TLS_CA_FILE: Type.Optional(
    Type.String({
      typeText: 'file',
      description:
        "Extra CA certificates trusted for the verification endpoints and DoH (a private CA, the demo lab's)",
    }),
  ),
  EGRESS_POLICY: Type.Optional(
    Type.String({
      typeText: 'JSON',
      description:
        'What workspaces may reach through their upstream, for hosts whose own policy and whose user\'s default are unset (docs/egress-policy.md): `{"mode":"enforce","default_action":"allow","rules":[{"action":"deny","domain":"*.example.com"}]}`; `mode` is `off`, `log-only` (blocks nothing, records what it would block) or `enforce`; a rule names a `domain` (exact or `*.`), an `address` or CIDR, and/or a `port`',
    }),
  ),
  EGRESS_METER_SECONDS: wholeNumber(
    60,
    "How often the egress meter reads each egress gateway's byte counters into the hourly figures; `0` turns it off (counts then wait in the gateways)",
  ),
  EGRESS_POLICY_LOG_SECONDS: wholeNumber(
    30,
    "How often each egress gateway's log of what its policy blocked (or in log-only mode would block) is read into the per-minute counts; `0` turns it off",
  ),
  EGRESS_POLICY_LOG_DESTINATIONS: positiveWhole(
    200,
    'Distinct destinations counted per host and minute in that log; the decisions past them are summed as uncounted, and shown so',
  ),
  V2RAY_BIN: Type.String({
    default: 'v2ray',
    description: "The tunnel engine the egress test runs on the gateway's machine",
  }),
});
export type EgressVariables = Static<typeof EgressVariables>;

/**
 * How the tunnel resolves names and how a path is verified (docs/egress-probe.md). Every endpoint is a setting:
 * the defaults are public ones, tests point them at the network lab's stand-ins.
 */
export interface EgressSettings {
  /** The tunnel's resolver for A/AAAA: DNS-over-HTTPS through the upstream (EGRESS_DOH_URL). */
  dohUrl: string;
  /** The tunnel's resolver for every other record type, over TCP through the upstream (EGRESS_DNS_SERVER). */
  dnsServer: { address: string; port: number };
  /**
   * A TXT name in class CH that the resolvers answer with the asker's address (EGRESS_DNS_WHOAMI). Asked over
   * DoH at `dohUrl` through the tunnel, it proves the resolver sees the exit, in an answer the upstream cannot
   * forge; asked of the tunnel's own DNS (`dnsServer`), that the tunnel's DNS enters the upstream. Null turns
   * both off.
   */
  dnsWhoami: string | null;
  /**
   * IP echo endpoints asked through the tunnel; every one that answers must see the declared exit: the probe's
   * echo first when there is a probe, then EGRESS_EXIT_IP_URLS (or the public defaults).
   */
  exitIpUrls: string[];
  /**
   * How many of them must answer (EGRESS_EXIT_IP_MIN_ANSWERS, default 1): one provider's outage is its own outcome,
   * not a verdict on every upstream.
   */
  minEchoAnswers: number;
  /** The operator's own egress probe (EGRESS_PROBE_*): the strongest verification. Null: public endpoints only. */
  probe: EgressProbe | null;
  caFile: string | null;
  v2rayCommand: string;
  /**
   * What a host's workspace may reach through its upstream when neither the host nor its user sets a policy
   * (EGRESS_POLICY, JSON; null: everything).
   */
  policy: EgressPolicy | null;
}

/**
 * A self-hosted egress probe (apps/egress-probe): its IP echo (HTTPS), its zone, its DoH, the token of its DNS
 * log, and the CA its certificate must chain to (EGRESS_PROBE_CA_FILE; null: the system's and caFile).
 */
export interface EgressProbe {
  url: string;
  dnsZone: string;
  dohUrl: string;
  token: string | null;
  caFile: string | null;
}

/** The egress settings from their variables, and what is wrong between them. */
export function egressSettings(variables: EgressVariables, problems: string[]): EgressSettings {
  const dnsMatch = DNS_SERVER.exec(variables.EGRESS_DNS_SERVER);
  const dnsServer = { address: dnsMatch?.[1] ?? '0.0.0.0', port: Number(dnsMatch?.[2] ?? 53) };
  const whoamiText = variables.EGRESS_DNS_WHOAMI;
  const dnsWhoami = whoamiText === '' || whoamiText === 'off' ? null : whoamiText.replace(/\.$/, '');

  let probe: EgressProbe | null = null;
  const probeUrl = variables.EGRESS_PROBE_URL || null;
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
    const dnsZone = variables.EGRESS_PROBE_DNS_ZONE?.replace(/\.$/, '') ?? '';
    if (!DNS_NAME.test(dnsZone))
      problems.push("EGRESS_PROBE_DNS_ZONE must name the probe's zone when EGRESS_PROBE_URL is set");
    const probeDoh = variables.EGRESS_PROBE_DOH_URL ?? '';
    if (!probeDoh)
      problems.push("EGRESS_PROBE_DOH_URL must name the probe's DoH endpoint when EGRESS_PROBE_URL is set");
    else if (!isDohUrl(probeDoh))
      problems.push(
        `EGRESS_PROBE_DOH_URL must be an https:// URL whose host is an IP address (got "${probeDoh}")`,
      );
    const probeCa = variables.EGRESS_PROBE_CA_FILE || null;
    if (probeCa && !existsSync(probeCa)) problems.push(`EGRESS_PROBE_CA_FILE: no such file: ${probeCa}`);
    probe = {
      url: probeUrl,
      dnsZone: dnsZone.toLowerCase(),
      dohUrl: probeDoh,
      token: variables.EGRESS_PROBE_TOKEN || null,
      caFile: probeCa,
    };
  } else {
    const stray = (
      ['EGRESS_PROBE_DNS_ZONE', 'EGRESS_PROBE_DOH_URL', 'EGRESS_PROBE_TOKEN', 'EGRESS_PROBE_CA_FILE'] as const
    ).filter((name) => variables[name]);
    if (stray.length > 0)
      problems.push(`${stray.join(', ')} only apply with EGRESS_PROBE_URL (the probe's IP echo)`);
  }

  // The HTTPS echoes stay beside a probe: each is one more party that must see the exit.
  const exitIpUrls = [...variables.EGRESS_EXIT_IP_URLS];
  if (probe) exitIpUrls.unshift(probe.url);
  if (exitIpUrls.length === 0) problems.push('EGRESS_EXIT_IP_URLS must name at least one IP echo');
  const minEchoAnswers = variables.EGRESS_EXIT_IP_MIN_ANSWERS;
  if (minEchoAnswers > Math.max(1, exitIpUrls.length))
    problems.push(
      `EGRESS_EXIT_IP_MIN_ANSWERS must be a whole number from 1 to the number of IP echoes (${exitIpUrls.length}) (got "${minEchoAnswers}")`,
    );

  const caFile = variables.EGRESS_TLS_CA_FILE || null;
  if (caFile && !existsSync(caFile)) problems.push(`EGRESS_TLS_CA_FILE: no such file: ${caFile}`);
  return {
    dohUrl: variables.EGRESS_DOH_URL,
    dnsServer,
    dnsWhoami,
    exitIpUrls,
    minEchoAnswers,
    probe,
    caFile,
    v2rayCommand: variables.V2RAY_BIN,
    policy: egressPolicy(variables.EGRESS_POLICY, problems),
  };
}

const DNS_NAME = /^[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,62}))*$/;
const DNS_SERVER = /^(\d{1,3}(?:\.\d{1,3}){3})(?::(\d{1,5}))?$/;

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
function isDohUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return url.protocol === 'https:' && isIP(url.hostname.replace(/^\[|\]$/g, '')) !== 0;
  } catch {
    return false;
  }
}

defineFormat('doh-url', 'https:// URL, host an IP address', isDohUrl);
defineFormat('echo-url', 'http:// or https:// URL', (text) => isEchoUrl(text, false));
defineFormat('ipv4-port', 'IPv4 address, :port optional', (text) => {
  const match = DNS_SERVER.exec(text);
  const port = Number(match?.[2] ?? 53);
  return match !== null && isIPv4(match[1]!) && port >= 1 && port <= 65535;
});
defineFormat(
  'dns-name-or-off',
  'DNS name, or off',
  (text) => text === '' || text === 'off' || DNS_NAME.test(text.replace(/\.$/, '')),
);

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
