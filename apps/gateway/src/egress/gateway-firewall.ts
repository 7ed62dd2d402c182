import { isIP, isIPv4 } from 'node:net';
import { nftInterface, nftMark, nftPort, nftTable } from './nft-values.js';
import type { UpstreamEndpoint } from './tunnel-engine.js';

export interface GatewayFirewallParams {
  /** nftables table (family inet) owned by this ruleset. */
  table: string;
  /** The egress gateway's link to the workspace. */
  workspaceInterface: string;
  /** The egress gateway's link to the outside world. */
  uplinkInterface: string;
  /** The single destination allowed out. */
  upstream: UpstreamEndpoint;
  /** SO_MARK the tunnel engine sets on its upstream socket. */
  socketMark: number;
  /** Mark of TPROXY'd packets; policy routing must deliver it locally (see below). */
  tproxyMark: number;
  /** The tunnel engine's TPROXY port (GatewayConfigParams.transparentPort). */
  transparentPort: number;
  /** The tunnel engine's DNS port on the workspace link (GatewayConfigParams.dnsListen.port). */
  dnsPort: number;
  /**
   * A TCP relay in the egress gateway through which one address on the uplink (the control plane's) reaches
   * the workspace's services without forwarding: connections from `source` to these local ports are accepted,
   * and only their replies may leave on the uplink.
   */
  relay?: { source: string; ports: readonly number[] };
}

/**
 * The kill switch of a host's egress gateway (spike-egress.md §12, design (c)), as text for `nft -f`. The first
 * two lines make loading it an atomic replace, so a new upstream never opens a gap.
 *
 * The workspace's TCP and UDP are TPROXY'd to the tunnel and its DNS redirected to the tunnel's resolver; nothing
 * is forwarded; the only packets that may leave on the uplink are the tunnel's marked ones to the upstream's
 * address and port (and, with `relay`, replies to the relay's one client); IPv6 from the workspace is dropped.
 * It relies on the gateway's namespace also having
 * `net.ipv4.ip_forward=0`, IPv6 disabled, and the TPROXY route
 * `ip rule add fwmark <tproxyMark> lookup <table>; ip route add local 0.0.0.0/0 dev lo table <table>`.
 */
export function renderGatewayFirewall(params: GatewayFirewallParams): string {
  const { upstream } = params;
  const table = nftTable(params.table);
  const workspace = nftInterface('workspaceInterface', params.workspaceInterface);
  const uplink = nftInterface('uplinkInterface', params.uplinkInterface);
  const socketMark = nftMark('socketMark', params.socketMark);
  const tproxyMark = nftMark('tproxyMark', params.tproxyMark);
  if (params.socketMark === params.tproxyMark) throw new TypeError('socketMark and tproxyMark must differ');
  const transparentPort = nftPort('transparentPort', params.transparentPort);
  const dnsPort = nftPort('dnsPort', params.dnsPort);
  const upstreamPort = nftPort('upstream.port', upstream.port);
  const family = isIP(upstream.address);
  if (family === 0) throw new TypeError(`upstream.address must be an IP literal: ${upstream.address}`);
  if (upstream.protocols.length === 0) throw new TypeError('upstream.protocols is empty');
  const daddr = `${family === 4 ? 'ip' : 'ip6'} daddr ${upstream.address}`;
  const relay = relayRules(params.relay, uplink);
  const allowUpstream = upstream.protocols.map(
    (protocol) =>
      `    meta mark ${socketMark} oifname ${uplink} ${daddr} ${protocol} dport ${upstreamPort} accept`,
  );
  return [
    '# Kill switch of a cloud-cli-proxy egress gateway. Generated; load with `nft -f`.',
    `table inet ${table}`,
    `delete table inet ${table}`,
    `table inet ${table} {`,
    '  chain prerouting_mangle {',
    '    type filter hook prerouting priority mangle; policy accept;',
    `    iifname != ${workspace} return`,
    '    meta nfproto ipv6 drop',
    '    fib daddr type local return',
    '    meta l4proto { tcp, udp } th dport 53 return',
    `    meta l4proto { tcp, udp } tproxy ip to 127.0.0.1:${transparentPort} meta mark set ${tproxyMark} accept`,
    '  }',
    '  chain prerouting_nat {',
    '    type nat hook prerouting priority dstnat; policy accept;',
    `    iifname ${workspace} meta l4proto { tcp, udp } th dport 53 redirect to :${dnsPort}`,
    '  }',
    '  chain input {',
    '    type filter hook input priority filter; policy drop;',
    '    iifname "lo" accept',
    '    ct state established,related accept',
    `    iifname ${workspace} meta mark ${tproxyMark} accept`,
    `    iifname ${workspace} meta l4proto { tcp, udp } th dport ${dnsPort} accept`,
    ...relay.input,
    '  }',
    '  chain forward {',
    '    type filter hook forward priority filter; policy drop;',
    '  }',
    '  chain output {',
    '    type filter hook output priority filter; policy drop;',
    '    oifname "lo" accept',
    `    oifname ${workspace} meta nfproto ipv4 accept`,
    ...allowUpstream,
    ...relay.output,
    '  }',
    '}',
    '',
  ].join('\n');
}

function relayRules(relay: GatewayFirewallParams['relay'], uplink: string) {
  if (!relay) return { input: [], output: [] };
  if (!isIPv4(relay.source)) throw new TypeError(`relay.source must be an IPv4 literal: ${relay.source}`);
  if (relay.ports.length === 0) throw new TypeError('relay.ports is empty');
  const ports = `{ ${relay.ports.map((value) => nftPort('relay.ports', value)).join(', ')} }`;
  return {
    input: [`    iifname ${uplink} ip saddr ${relay.source} tcp dport ${ports} accept`],
    output: [`    oifname ${uplink} ip daddr ${relay.source} tcp sport ${ports} ct state established accept`],
  };
}
