import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EgressPolicy } from '@ccp/api';
import { v2rayGatewayConfig } from '../../src/egress/gateway-config.js';
import { BLOCKED_TAG, v2rayPolicyRules, WOULD_BLOCK_TAG } from '../../src/egress/v2ray-policy.js';
import { gatewayParams, VARIANTS } from './variants.js';

const policy: EgressPolicy = {
  mode: 'enforce',
  default_action: 'deny',
  rules: [
    { action: 'deny', domain: 'ads.example.com' },
    { action: 'allow', domain: '*.example.com', port: '443' },
    { action: 'allow', address: '203.0.113.0/24' },
    { action: 'allow', port: '8000-8999' },
  ],
};

describe('egress policy in the v2ray routing', () => {
  it('rules in order, then the default; a name alone or its subdomains; denials to a blackhole', () => {
    const rules = v2rayPolicyRules(policy, 'tproxy', 'proxy');
    assert.deepEqual(rules, [
      { type: 'field', inboundTag: ['tproxy'], domain: ['full:ads.example.com'], outboundTag: BLOCKED_TAG },
      {
        type: 'field',
        inboundTag: ['tproxy'],
        domain: ['regexp:\\.example\\.com$'],
        port: '443',
        outboundTag: 'proxy',
      },
      { type: 'field', inboundTag: ['tproxy'], ip: ['203.0.113.0/24'], outboundTag: 'proxy' },
      { type: 'field', inboundTag: ['tproxy'], port: '8000-8999', outboundTag: 'proxy' },
      { type: 'field', inboundTag: ['tproxy'], outboundTag: BLOCKED_TAG },
    ]);
  });

  it('off routes nothing differently; log-only sends what it would deny to the upstream under its own tag', () => {
    assert.deepEqual(v2rayPolicyRules({ ...policy, mode: 'off' }, 'tproxy', 'proxy'), []);
    const logged = v2rayPolicyRules({ ...policy, mode: 'log-only' }, 'tproxy', 'proxy');
    const enforced = v2rayPolicyRules(policy, 'tproxy', 'proxy');
    assert.deepEqual(
      logged.map((rule) => rule.outboundTag),
      enforced.map((rule) => (rule.outboundTag === BLOCKED_TAG ? WOULD_BLOCK_TAG : rule.outboundTag)),
    );
    assert.ok(logged.some((rule) => rule.outboundTag === WOULD_BLOCK_TAG));
  });

  it('refuses a rule that matches nothing, a bad address and a backwards port range', () => {
    const one = (rule: EgressPolicy['rules'][number]) => () =>
      v2rayPolicyRules({ ...policy, rules: [rule] }, 'tproxy', 'proxy');
    assert.throws(one({ action: 'deny' }), /rules\[0\] matches nothing/);
    assert.throws(one({ action: 'deny', address: '203.0.113.0/33' }), /not an address or CIDR/);
    assert.throws(one({ action: 'deny', address: 'example.com' }), /not an address or CIDR/);
    assert.throws(one({ action: 'deny', port: '9000-8000' }), /not a port or a range/);
    assert.doesNotThrow(one({ action: 'deny', address: '2001:db8::/32' }));
  });

  it("in the gateway config: DNS stays the tunnel's, the upstream stays the default outbound", () => {
    const config = v2rayGatewayConfig({ ...gatewayParams(VARIANTS[0]!.upstream), policy });
    assert.equal(config.outbounds[0]?.tag, 'proxy');
    assert.deepEqual(config.outbounds.at(-1), { tag: BLOCKED_TAG, protocol: 'blackhole', settings: {} });
    const dnsRule = config.routing.rules.findIndex((rule) => rule.port === '53');
    const firstPolicyRule = config.routing.rules.findIndex((rule) => rule.domain !== undefined);
    assert.ok(dnsRule >= 0 && dnsRule < firstPolicyRule);
    const plain = v2rayGatewayConfig(gatewayParams(VARIANTS[0]!.upstream));
    assert.equal(
      plain.outbounds.some((outbound) => outbound.tag === BLOCKED_TAG),
      false,
    );
  });
});
