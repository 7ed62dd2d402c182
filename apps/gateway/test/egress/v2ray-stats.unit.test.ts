import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { v2rayGatewayConfig } from '../../src/egress/gateway-config.js';
import { v2rayEngine } from '../../src/egress/v2ray-engine.js';
import { gatewayParams, VARIANTS } from './variants.js';

// What v2ctl 4.34 prints for `StatsService.QueryStats` (a counter at zero has no value line).
const PRINTED = `stat: <
  name: "inbound>>>tproxy>>>traffic>>>uplink"
  value: 83
>
stat: <
  name: "inbound>>>counters-api>>>traffic>>>downlink"
  value: 999
>
stat: <
  name: "inbound>>>tproxy>>>traffic>>>downlink"
  value: 1000205
>
stat: <
  name: "inbound>>>dns-in>>>traffic>>>uplink"
  value: 40
>
stat: <
  name: "inbound>>>dns-in>>>traffic>>>downlink"
>
`;

describe('egress counters (v2ray stats)', () => {
  it("reads the workspace's bytes and its DNS, not the API's own", () => {
    assert.deepEqual(v2rayEngine.parseCounters(PRINTED), { sent: 123, received: 1000205 });
    assert.deepEqual(v2rayEngine.parseCounters(''), { sent: 0, received: 0 });
  });

  it('reads and resets every outbound counter in one call, in the gateway', () => {
    const command = v2rayEngine.counterCommand(10085);
    assert.deepEqual(command.slice(0, 4), [
      '/usr/bin/v2ctl',
      'api',
      '--server=127.0.0.1:10085',
      'StatsService.QueryStats',
    ]);
    assert.match(command[4]!, /reset: true/);
  });

  it('the gateway config counts the upstream and answers on loopback only, routed to the API', () => {
    const upstream = VARIANTS[0]!.upstream;
    const config = v2rayGatewayConfig(gatewayParams(upstream));
    assert.deepEqual(config.policy, { system: { statsInboundUplink: true, statsInboundDownlink: true } });
    const api = config.inbounds.find((inbound) => inbound.tag === config.api?.tag);
    assert.equal(api?.listen, '127.0.0.1');
    assert.equal(api?.port, 10085);
    const rule = config.routing.rules.find((r) => r.inboundTag.includes(api!.tag));
    assert.equal(rule?.outboundTag, config.api?.tag);
    const { countersPort: _, ...without } = gatewayParams(upstream);
    const plain = v2rayGatewayConfig(without);
    assert.equal(plain.stats, undefined);
    assert.equal(plain.inbounds.length, config.inbounds.length - 1);
  });
});
