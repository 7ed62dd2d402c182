import type { GatewayConfigParams } from './tunnel-engine.js';
import { v2rayDecisionLog } from './v2ray-decisions.js';
import { BLOCKED_TAG, policyRecordsDecisions, v2rayPolicyRules, WOULD_BLOCK_TAG } from './v2ray-policy.js';
import { v2rayCountersParts } from './v2ray-stats.js';
import { assertPort, DNS_OUT_TAG, PROXY_TAG, tunnelConfig, type V2rayConfig } from './v2ray-tunnel.js';

export const TPROXY_TAG = 'tproxy';

/**
 * The v2ray config of a host's egress gateway: the workspace's TCP and UDP arrive by TPROXY (see
 * gateway-firewall.ts), its DNS at `dnsListen`, and everything leaves through the marked upstream socket.
 */
export function v2rayGatewayConfig(params: GatewayConfigParams): V2rayConfig {
  assertPort('transparentPort', params.transparentPort);
  if (!Number.isInteger(params.socketMark) || params.socketMark < 1 || params.socketMark > 0xffffffff) {
    throw new TypeError(`socketMark must be a non-zero 32-bit mark: ${params.socketMark}`);
  }
  const counters = params.countersPort === undefined ? null : v2rayCountersParts(params.countersPort);
  if (params.countersPort !== undefined) assertPort('countersPort', params.countersPort);
  const policyRules = params.policy ? v2rayPolicyRules(params.policy, TPROXY_TAG, PROXY_TAG) : [];
  const config = tunnelConfig({
    upstream: params.upstream,
    mark: params.socketMark,
    dns: params.dns,
    dnsListen: params.dnsListen,
    inbounds: [
      {
        tag: TPROXY_TAG,
        listen: '0.0.0.0',
        port: params.transparentPort,
        protocol: 'dokodemo-door',
        settings: { network: 'tcp,udp', followRedirect: true },
        streamSettings: { sockopt: { tproxy: 'tproxy' } },
        ...(params.sniffing ? { sniffing: { enabled: true, destOverride: ['http', 'tls'] } } : {}),
      },
      ...(counters ? [counters.inbound] : []),
    ],
    // DNS to a hard-coded resolver that slipped past the firewall's redirect is still answered by the tunnel.
    rules: [
      { type: 'field', inboundTag: [TPROXY_TAG], port: '53', outboundTag: DNS_OUT_TAG },
      ...(counters ? [counters.rule] : []),
      ...policyRules,
    ],
  });
  if (policyRules.length > 0 && params.policy?.mode === 'enforce')
    config.outbounds.push({ tag: BLOCKED_TAG, protocol: 'blackhole', settings: {} });
  // log-only: the upstream's own outbound again, under a tag of its own for the log.
  const upstream = config.outbounds.find((outbound) => outbound.tag === PROXY_TAG);
  if (policyRules.length > 0 && params.policy?.mode === 'log-only' && upstream)
    config.outbounds.push({ ...upstream, tag: WOULD_BLOCK_TAG });
  const decisionLog = policyRecordsDecisions(params.policy) ? { log: v2rayDecisionLog() } : {};
  return { ...config, ...decisionLog, ...(counters ? counters.sections : {}) };
}
