import { renderGatewayFirewall } from '../egress/gateway-firewall.js';
import type { ResolvedUpstream, TunnelDnsSettings } from '../egress/tunnel-engine.js';
import { v2rayEngine } from '../egress/v2ray-engine.js';

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
} as const;

const RELAY_OUTBOUND_TAG = 'workspace-relay';

export interface EgressGatewayFilesParams {
  upstream: ResolvedUpstream;
  dns: TunnelDnsSettings;
  /** The control plane's address on the uplink network: the only client of the relay. */
  relaySource: string;
}

export interface EgressGatewayFiles {
  /** v2ray config (holds the upstream's secrets). */
  v2ray: string;
  /** nftables ruleset: the kill switch. */
  ruleset: string;
}

interface V2rayConfigShape {
  inbounds: object[];
  outbounds: object[];
  routing: { rules: object[] };
}

/**
 * The two files the egress gateway image reads (image/README.md): the tunnel config and its kill switch.
 *
 * Besides the tunnel, v2ray relays the workspace's sshd and desktop to the uplink: one dokodemo-door inbound
 * per port, routed to a freedom outbound that can only dial the workspace's fixed address. That keeps
 * forwarding off in the gateway (the relay is a local socket, like the tunnel) and needs nothing the image
 * lacks; the ruleset admits those ports from `relaySource` only. The rendered gateway config has no parameter
 * for extra inbounds, so they are added to its JSON here.
 */
export function renderEgressGatewayFiles(params: EgressGatewayFilesParams): EgressGatewayFiles {
  const config = JSON.parse(
    v2rayEngine.renderGatewayConfig({
      upstream: params.upstream,
      socketMark: GATEWAY_NETWORK.socketMark,
      transparentPort: GATEWAY_NETWORK.transparentPort,
      // The address does not exist yet when v2ray starts: the container runs with ip_nonlocal_bind=1.
      dnsListen: { address: WORKSPACE_LINK.gatewayAddress, port: GATEWAY_NETWORK.dnsPort },
      dns: params.dns,
      sniffing: true,
    }),
  ) as V2rayConfigShape;
  const relayTags = Object.entries(WORKSPACE_PORTS).map(([name, port]) => {
    const tag = `relay-${name}`;
    config.inbounds.push({
      tag,
      // The uplink address is only known once Docker has started the container; the ruleset admits the ports
      // on the uplink from the relay's client alone.
      listen: '0.0.0.0',
      port,
      protocol: 'dokodemo-door',
      settings: { address: WORKSPACE_LINK.workspaceAddress, port, network: 'tcp' },
    });
    return tag;
  });
  config.outbounds.push({ tag: RELAY_OUTBOUND_TAG, protocol: 'freedom', settings: {} });
  config.routing.rules.unshift({ type: 'field', inboundTag: relayTags, outboundTag: RELAY_OUTBOUND_TAG });

  const ruleset = renderGatewayFirewall({
    table: GATEWAY_NETWORK.table,
    workspaceInterface: WORKSPACE_LINK.gatewayInterface,
    uplinkInterface: GATEWAY_NETWORK.uplinkInterface,
    upstream: v2rayEngine.upstreamEndpoint(params.upstream),
    socketMark: GATEWAY_NETWORK.socketMark,
    tproxyMark: GATEWAY_NETWORK.tproxyMark,
    transparentPort: GATEWAY_NETWORK.transparentPort,
    dnsPort: GATEWAY_NETWORK.dnsPort,
    relay: { source: params.relaySource, ports: Object.values(WORKSPACE_PORTS) },
  });
  return { v2ray: `${JSON.stringify(config, null, 2)}\n`, ruleset };
}
