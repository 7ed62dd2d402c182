import type { EgressPolicy, EgressRule } from '@ccp/api';
import { dnsFilterLines, renderDnsFilterRules } from '../egress/dns-filter.js';
import { renderGatewayFirewall } from '../egress/gateway-firewall.js';
import type { ResolvedUpstream, TunnelDnsSettings, TunnelEngine } from '../egress/tunnel-engine.js';
import { checkUplinkPolicy, type UplinkPolicy } from '../egress/uplink-guard.js';

/**
 * The point-to-point link between a workspace and its egress gateway. Every pair lives in its own two network
 * namespaces, so all hosts can use the same link-local addresses and interface names.
 */
export const WORKSPACE_LINK = {
  gatewayAddress: '169.254.77.1',
  workspaceAddress: '169.254.77.2',
  prefixLength: 30,
  /** The link's name inside the egress gateway (its uplink is Docker's `eth0`). */
  gatewayInterface: 'ccp-ws',
  /** The link's name inside the workspace, which has no other interface but `lo`. */
  workspaceInterface: 'eth0',
} as const;

/** Ports of the workspace's services; the relay in the egress gateway listens on the same numbers. */
export const WORKSPACE_PORTS = { ssh: 22, desktop: 6080 } as const;

/** Marks, table and ports inside the egress gateway; the entrypoint gets the TPROXY ones by environment. */
export const GATEWAY_NETWORK = {
  table: 'ccp_egress',
  uplinkInterface: 'eth0',
  socketMark: 0xff,
  tproxyMark: 0x1,
  tproxyRouteTable: 100,
  transparentPort: 12345,
  dnsPort: 53,
  /** Where v2ray answers DNS, on the loopback behind the DNS filter (which takes dnsPort). */
  filteredDnsPort: 5353,
  /** v2ray's counters of the upstream's bytes, on the gateway's loopback (egress meter). */
  countersPort: 10085,
} as const;

/**
 * Connections the relay takes at once on each port. Each is one forked process in the egress gateway (about
 * 0.2 MiB), so the gateway's PID limit grows with it; the SSH proxy refuses a host's sessions past
 * SSH_MAX_SESSIONS_PER_HOST, which may not exceed this, so a user hears why instead of waiting for a timeout.
 */
export const RELAY_CONNECTIONS_PER_PORT = 128;

/** Processes of an egress gateway with no connection relayed (tini, the entrypoint, v2ray's threads, the
 * listeners: 14 measured), with room to spare. */
const IDLE_GATEWAY_PIDS = 64;

/** The egress gateway container's limits: every relay port full still fits its PIDs and memory. */
export const EGRESS_GATEWAY_LIMITS = {
  memoryMb: 256,
  pids: IDLE_GATEWAY_PIDS + Object.keys(WORKSPACE_PORTS).length * RELAY_CONNECTIONS_PER_PORT,
} as const;

/**
 * The relay that carries the control plane's connections to the workspace's sshd and desktop: its own
 * processes in the egress gateway (image/README.md), beside the tunnel and never inside it, so that restarting
 * the tunnel for a new upstream or after a crash leaves open sessions alone. The entrypoint reads these.
 */
export function relayEnvironment(): string[] {
  return [
    `EGRESS_RELAY_PORTS=${Object.values(WORKSPACE_PORTS).join(' ')}`,
    `EGRESS_RELAY_TARGET=${WORKSPACE_LINK.workspaceAddress}`,
    `EGRESS_RELAY_MAX_CONNECTIONS=${RELAY_CONNECTIONS_PER_PORT}`,
  ];
}

export interface EgressGatewayFilesParams {
  engine: TunnelEngine;
  upstream: ResolvedUpstream;
  dns: TunnelDnsSettings;
  /** The control plane's address on the uplink network: the only client of the relay. */
  relaySource: string;
  /** What the workspace may reach (the host's effective egress policy); everything without it. */
  policy?: EgressPolicy | null;
  /**
   * What the path check reaches from the workspace (egress-verification.ts pathCheckDestinations): allowed before
   * an enforced policy's rules, its names answered by the DNS filter.
   */
  pathCheck?: { rules: EgressRule[]; names: string[] };
}

export interface EgressGatewayFiles {
  /** v2ray config (holds the upstream's secrets). */
  v2ray: string;
  /** nftables ruleset: the kill switch. */
  ruleset: string;
  /** What the host lets the gateway send on the uplink (uplink-guard.ts), the kill switch outside its reach. */
  uplink: UplinkPolicy;
  /**
   * The DNS filter's rules (dns-filter.ts): the filter answers the workspace's DNS and asks v2ray on the loopback,
   * refusing the names the policy refuses (none without one), and asks again for a question v2ray dropped.
   */
  dnsFilter: string;
}

/**
 * The two files the egress gateway image reads (image/README.md): the tunnel config and its kill switch. The
 * ruleset admits the relay's ports on the uplink from `relaySource` alone, and lets only their replies out.
 */
export function renderEgressGatewayFiles(params: EgressGatewayFilesParams): EgressGatewayFiles {
  const pathCheck = params.pathCheck ?? { rules: [], names: [] };
  const policy =
    params.policy?.mode === 'enforce'
      ? { ...params.policy, rules: [...pathCheck.rules, ...params.policy.rules] }
      : params.policy;
  const filter = (policy && dnsFilterLines(policy, pathCheck.names)) ?? [];
  const v2ray = params.engine.renderGatewayConfig({
    upstream: params.upstream,
    socketMark: GATEWAY_NETWORK.socketMark,
    transparentPort: GATEWAY_NETWORK.transparentPort,
    // Behind the filter, v2ray answers on the loopback, which the workspace cannot reach.
    dnsListen: { address: '127.0.0.1', port: GATEWAY_NETWORK.filteredDnsPort },
    dns: params.dns,
    sniffing: true,
    countersPort: GATEWAY_NETWORK.countersPort,
    ...(policy ? { policy } : {}),
  });
  const upstream = params.engine.upstreamEndpoint(params.upstream);
  const relayPorts = Object.values(WORKSPACE_PORTS);
  const ruleset = renderGatewayFirewall({
    table: GATEWAY_NETWORK.table,
    workspaceInterface: WORKSPACE_LINK.gatewayInterface,
    uplinkInterface: GATEWAY_NETWORK.uplinkInterface,
    upstream,
    socketMark: GATEWAY_NETWORK.socketMark,
    tproxyMark: GATEWAY_NETWORK.tproxyMark,
    transparentPort: GATEWAY_NETWORK.transparentPort,
    dnsPort: GATEWAY_NETWORK.dnsPort,
    relay: { source: params.relaySource, ports: relayPorts },
  });
  const uplink = checkUplinkPolicy({ upstream, relay: { client: params.relaySource, ports: relayPorts } });
  return { v2ray, ruleset, uplink, dnsFilter: renderDnsFilterRules(filter) };
}
