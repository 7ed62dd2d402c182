import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EgressPolicy } from '@ccp/api';
import { dnsFilterLines, dnsVerdict, renderDnsFilterRules } from '../../src/egress/dns-filter.js';
import { v2rayEngine } from '../../src/egress/v2ray-engine.js';
import { renderEgressGatewayFiles } from '../../src/runtime/egress-gateway-files.js';

const enforce = (rules: EgressPolicy['rules'], default_action: 'allow' | 'deny' = 'allow'): EgressPolicy => ({
  mode: 'enforce',
  default_action,
  rules,
});

/** Which names the workspace's resolver refuses: exactly those every connection to which the policy denies. */
describe('DNS filter rules', () => {
  it('refuses a denied name and its subdomains as the rules say, and answers the rest', () => {
    const lines = dnsFilterLines(
      enforce([
        { action: 'allow', domain: 'api.example.com' },
        { action: 'deny', domain: '*.example.com' },
        { action: 'deny', domain: 'example.org' },
      ]),
    )!;
    const verdicts = Object.fromEntries(
      [
        'api.example.com',
        'www.example.com',
        'a.b.example.com',
        'example.com',
        'example.org',
        'www.example.org',
      ].map((name) => [name, dnsVerdict(lines, name)]),
    );
    assert.deepEqual(verdicts, {
      'api.example.com': 'answer',
      'www.example.com': 'refuse',
      'a.b.example.com': 'refuse',
      'example.com': 'answer',
      'example.org': 'refuse',
      'www.example.org': 'answer',
    });
  });

  it('answers a name some port may reach, and leaves addresses to the connection', () => {
    const lines = dnsFilterLines(
      enforce(
        [
          { action: 'deny', domain: 'mail.example.com', port: '25' },
          { action: 'allow', domain: 'git.example.com', port: '22' },
          { action: 'allow', address: '203.0.113.0/24' },
        ],
        'deny',
      ),
      ['whoami.test', '*.probe.test'],
    )!;
    assert.equal(dnsVerdict(lines, 'git.example.com'), 'answer');
    assert.equal(dnsVerdict(lines, 'mail.example.com'), 'refuse');
    assert.equal(dnsVerdict(lines, 'www.example.com'), 'refuse');
    assert.equal(dnsVerdict(lines, 'whoami.test'), 'answer');
    assert.equal(dnsVerdict(lines, 'x1.probe.test'), 'answer');
    assert.equal(
      renderDnsFilterRules(lines),
      [
        '# DNS filter of a cloud-cli-proxy egress gateway. Generated; the first line that matches a name decides.',
        'answer whoami.test',
        'answer *.probe.test',
        'answer git.example.com',
        'refuse *',
        '',
      ].join('\n'),
    );
  });

  it('has no lines when nothing is refused or nothing is enforced', () => {
    assert.equal(dnsFilterLines(enforce([{ action: 'deny', address: '203.0.113.7' }])), null);
    assert.equal(
      dnsFilterLines(
        enforce([
          { action: 'allow', port: '443' },
          { action: 'deny', domain: 'x.test' },
        ]),
      ),
      null,
    );
    assert.equal(
      dnsFilterLines({
        mode: 'log-only',
        default_action: 'deny',
        rules: [{ action: 'deny', domain: 'x.test' }],
      }),
      null,
    );
  });
});

describe("the egress gateway's files with a policy", () => {
  const render = (policy: EgressPolicy | null) =>
    renderEgressGatewayFiles({
      engine: v2rayEngine,
      upstream: {
        config: { type: 'socks', server: '198.51.100.21', server_port: 1080, version: '5' },
        serverIp: '198.51.100.21',
      },
      dns: { dohUrl: 'https://203.0.113.53/dns-query', tcpResolver: { address: '203.0.113.53', port: 53 } },
      relaySource: '172.30.0.1',
      policy,
      pathCheck: {
        rules: [{ action: 'allow', address: '203.0.113.53', port: '443' }],
        names: ['whoami.test'],
      },
    });
  const dnsInbound = (v2ray: string) =>
    (JSON.parse(v2ray) as { inbounds: { tag: string; listen: string; port: number }[] }).inbounds.find(
      (inbound) => inbound.tag === 'dns-in',
    );

  it('puts the filter in front of v2ray when names are refused, the path check allowed first', () => {
    const files = render(enforce([{ action: 'deny', domain: 'www.example.com' }], 'deny'));
    assert.match(files.dnsFilter, /^answer whoami\.test\nrefuse www\.example\.com\nrefuse \*$/m);
    assert.deepEqual(dnsInbound(files.v2ray), {
      ...dnsInbound(files.v2ray),
      listen: '127.0.0.1',
      port: 5353,
    });
    const rules = (
      JSON.parse(files.v2ray) as { routing: { rules: { ip?: string[]; outboundTag: string }[] } }
    ).routing.rules;
    const exempt = rules.findIndex((rule) => rule.ip?.[0] === '203.0.113.53');
    const denied = rules.findIndex((rule) => rule.outboundTag === 'policy-blocked');
    assert.ok(exempt >= 0 && exempt < denied, 'the path check before the rules');
  });

  it('puts the filter, refusing nothing, in front of v2ray without a policy', () => {
    for (const policy of [null, enforce([{ action: 'deny', address: '203.0.113.7' }])]) {
      const files = render(policy);
      assert.equal(files.dnsFilter.split('\n').filter((line) => line && !line.startsWith('#')).length, 0);
      assert.deepEqual(dnsInbound(files.v2ray), {
        ...dnsInbound(files.v2ray),
        listen: '127.0.0.1',
        port: 5353,
      });
    }
  });
});
