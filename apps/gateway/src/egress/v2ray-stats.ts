import type { UpstreamCounters } from './tunnel-engine.js';
import type { V2rayInbound, V2rayRoutingRule } from './v2ray-tunnel.js';

const API_TAG = 'counters-api';

/**
 * What a config adds so v2ray counts the bytes of its inbounds and answers for them on a loopback port: the
 * stats and API services, and the inbound counters. Those count the workspace's own streams as v2ray reads and
 * writes them, which is what it moved through the upstream; the outbound's would add the upstream protocol's
 * framing and padding (VMess: about 2.5 %), which differs by protocol. Nothing but the host's own namespace
 * reaches 127.0.0.1 in the egress gateway; the workspace's packets to it are martians there.
 */
export function v2rayCountersParts(port: number) {
  const inbound: V2rayInbound = {
    tag: API_TAG,
    listen: '127.0.0.1',
    port,
    protocol: 'dokodemo-door',
    settings: { address: '127.0.0.1' },
  };
  const rule: V2rayRoutingRule = { type: 'field', inboundTag: [API_TAG], outboundTag: API_TAG };
  return {
    inbound,
    rule,
    sections: {
      stats: {},
      api: { tag: API_TAG, services: ['StatsService'] },
      policy: { system: { statsInboundUplink: true, statsInboundDownlink: true } },
    },
  };
}

/** v2ctl (beside v2ray in the egress gateway image) asks for every counter and resets them in one call. */
export function v2rayCounterCommand(port: number): readonly string[] {
  return [
    '/usr/bin/v2ctl',
    'api',
    `--server=127.0.0.1:${port}`,
    'StatsService.QueryStats',
    'pattern: "inbound>>>" reset: true',
  ];
}

const STAT = /name:\s*"inbound>>>([^"]+)>>>traffic>>>(uplink|downlink)"(?:\s*value:\s*(\d+))?/g;

/**
 * The bytes of the given inbounds in v2ctl's protobuf text (`stat: < name: "inbound>>>tproxy>>>traffic>>>uplink"
 * value: 83 >`; a counter at zero has no value line). The API's own inbound is left out.
 */
export function parseV2rayCounters(output: string, inboundTags: readonly string[]): UpstreamCounters {
  const counters: UpstreamCounters = { sent: 0, received: 0 };
  for (const match of output.matchAll(STAT)) {
    if (!inboundTags.includes(match[1]!)) continue;
    const value = Number(match[3] ?? 0);
    if (match[2] === 'uplink') counters.sent += value;
    else counters.received += value;
  }
  return counters;
}
