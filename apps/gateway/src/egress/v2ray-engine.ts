import { TPROXY_TAG, v2rayGatewayConfig } from './gateway-config.js';
import { v2rayTestConfig } from './test-config.js';
import type { TunnelEngine } from './tunnel-engine.js';
import { DECISION_LOG_PATH, parseV2rayDecisions } from './v2ray-decisions.js';
import { v2rayUpstreamEndpoint } from './v2ray-outbound.js';
import { parseV2rayCounters, v2rayCounterCommand } from './v2ray-stats.js';
import { DNS_IN_TAG } from './v2ray-tunnel.js';

const toText = (config: object) => `${JSON.stringify(config, null, 2)}\n`;

/** Debian's v2ray 4.34. Its binary carries file capabilities, which drop ambient ones: run a plain copy. */
export const v2rayEngine: TunnelEngine = {
  name: 'v2ray',
  defaultCommand: 'v2ray',
  runArgs: ['-config', 'stdin:'],
  checkArgs: ['-test', '-config', 'stdin:'],
  upstreamEndpoint: v2rayUpstreamEndpoint,
  renderGatewayConfig: (params) => toText(v2rayGatewayConfig(params)),
  renderTestConfig: (params) => toText(v2rayTestConfig(params)),
  counterCommand: v2rayCounterCommand,
  // The workspace's TCP and UDP, and its DNS (which the tunnel answers through the upstream).
  parseCounters: (output) => parseV2rayCounters(output, [TPROXY_TAG, DNS_IN_TAG]),
  decisionLogPath: DECISION_LOG_PATH,
  parseDecisions: parseV2rayDecisions,
};
