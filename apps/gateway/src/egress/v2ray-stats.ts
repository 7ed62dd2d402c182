import type { UpstreamCounters } from './tunnel-engine.js';
import type { V2rayInbound, V2rayRoutingRule } from './v2ray-tunnel.js';

const API_TAG = 'counters-api';

/**
 * What a config adds so v2ray counts the bytes of one outbound and answers for them on a loopback port: the
 * stats and API services, and the outbound counters, which count payload between v2ray and the outbound (what
 * the workspace sent and received, not the upstream protocol's framing). Nothing but the host's own namespace
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
      policy: { system: { statsOutboundUplink: true, statsOutboundDownlink: true } },
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
    'pattern: "outbound>>>" reset: true',
  ];
}

const STAT = /name:\s*"outbound>>>([^"]+)>>>traffic>>>(uplink|downlink)"(?:\s*value:\s*(\d+))?/g;

/**
 * The upstream's bytes in v2ctl's protobuf text (`stat: < name: "outbound>>>proxy>>>traffic>>>uplink" value:
 * 83 >`; a counter at zero has no value line). Only the upstream's outbound counts: DNS the tunnel answers
 * itself also leaves through it.
 */
export function parseV2rayCounters(output: string, outboundTag: string): UpstreamCounters {
  const counters: UpstreamCounters = { sent: 0, received: 0 };
  for (const match of output.matchAll(STAT)) {
    if (match[1] !== outboundTag) continue;
    const value = Number(match[3] ?? 0);
    if (match[2] === 'uplink') counters.sent += value;
    else counters.received += value;
  }
  return counters;
}
