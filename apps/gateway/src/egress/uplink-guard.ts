import { isIPv4 } from 'node:net';
import { nftInterface, nftMac, nftPort, nftTable } from './nft-values.js';
import type { UpstreamEndpoint } from './tunnel-engine.js';

/** What an egress gateway may send on the shared uplink: the same as its kill switch allows, nothing else. */
export interface UplinkPolicy {
  /** The single destination allowed out. */
  upstream: UpstreamEndpoint;
  /** Replies of the relay to its one client (the control plane's address on the uplink), on these TCP ports. */
  relay: { client: string; ports: readonly number[] };
}

export interface UplinkGuardParams {
  /** nftables table (family netdev) owned by this guard: one per host. */
  table: string;
  /** The host-side end of the egress gateway's uplink veth (its port on the uplink bridge). */
  device: string;
  /** The gateway's MAC and IPv4 address on the uplink, as Docker gave them. */
  mac: string;
  address: string;
  policy: UplinkPolicy;
}

/**
 * The kill switch again, outside the egress gateway (issue: v2ray parses every byte the workspace sends and runs
 * in the gateway's namespace with NET_ADMIN, where it could flush the gateway's own ruleset). This one is an
 * ingress hook on the host's end of the gateway's uplink veth, in the host's namespace, which nothing in the
 * container can reach. Every frame the gateway sends passes it before the bridge sees it: only its own MAC and
 * address (no spoofing of another gateway), ARP for itself, the upstream's address and port, and the relay's
 * replies (never a new connection) leave; everything else, IPv6 included, is dropped.
 *
 * The first two lines make loading it an atomic replace, so a switch of upstream opens no gap.
 */
export function renderUplinkGuard(params: UplinkGuardParams): string {
  const table = nftTable(params.table);
  const device = nftInterface('device', params.device);
  const mac = nftMac('mac', params.mac);
  const address = ipv4('address', params.address);
  const { upstream, relay } = checkUplinkPolicy(params.policy);
  const relayPorts = `{ ${relay.ports.join(', ')} }`;
  return [
    '# Uplink guard of a cloud-cli-proxy egress gateway (host side). Generated; load with `nft -f`.',
    `table netdev ${table}`,
    `delete table netdev ${table}`,
    `table netdev ${table} {`,
    '  chain from_gateway {',
    `    type filter hook ingress device ${device} priority -500; policy drop;`,
    `    ether saddr != ${mac} drop`,
    `    arp saddr ether ${mac} arp saddr ip ${address} accept`,
    `    ip saddr != ${address} drop`,
    ...upstream.protocols.map(
      (protocol) => `    ip daddr ${upstream.address} ${protocol} dport ${upstream.port} accept`,
    ),
    // A SYN alone would open a connection to the control plane; replies always carry ACK (or are a RST).
    `    ip daddr ${relay.client} tcp sport ${relayPorts} tcp flags & (syn | ack) != syn accept`,
    '  }',
    '}',
    '',
  ].join('\n');
}

/** The policy as given, once every value in it is known to be usable; else a TypeError that says why. */
export function checkUplinkPolicy(policy: UplinkPolicy): UplinkPolicy {
  const { upstream, relay } = policy;
  ipv4('upstream.address', upstream.address);
  nftPort('upstream.port', upstream.port);
  if (upstream.protocols.length === 0) throw new TypeError('upstream.protocols is empty');
  ipv4('relay.client', relay.client);
  if (relay.ports.length === 0) throw new TypeError('relay.ports is empty');
  for (const value of relay.ports) nftPort('relay.ports', value);
  return policy;
}

function ipv4(name: string, value: string): string {
  // The uplink bridge carries IPv4 only (the gateway has IPv6 disabled), so an IPv6 upstream could never leave.
  if (!isIPv4(value)) throw new TypeError(`${name} must be an IPv4 address on the uplink: ${value}`);
  return value;
}
