import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { v2rayGatewayConfig } from '../../src/egress/gateway-config.js';
import { renderGatewayFirewall } from '../../src/egress/gateway-firewall.js';
import { v2rayTestConfig } from '../../src/egress/test-config.js';
import { v2rayEngine } from '../../src/egress/v2ray-engine.js';
import { toV2rayOutbound } from '../../src/egress/v2ray-outbound.js';
import {
  assertGolden,
  DNS,
  EXIT_IP,
  gatewayParams,
  goldenDir,
  testParams,
  UUID,
  VARIANTS,
  type Variant,
} from './variants.js';

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;
const vmessWsTls = VARIANTS.find((v) => v.name === 'vmess-ws-tls') as Variant;
const shadowsocks = VARIANTS.find((v) => v.name === 'shadowsocks-aes-256-gcm') as Variant;

const firewallParams = (variant: Variant) => ({
  table: 'ccp_egress',
  workspaceInterface: 'eth1',
  uplinkInterface: 'eth0',
  upstream: v2rayEngine.upstreamEndpoint(variant.upstream),
  socketMark: 0xff,
  tproxyMark: 0x1,
  transparentPort: 12345,
  dnsPort: 53,
});

describe('v2ray outbound translation (golden)', () => {
  for (const { name, upstream } of VARIANTS) {
    it(name, async () => {
      const outbound = toV2rayOutbound(upstream.config, upstream.serverIp, 'proxy', { mark: 255 });
      await assertGolden(`outbound-${name}.golden.json`, json(outbound));
    });
  }

  it('writes the resolved IP, keeps the host name for TLS and WebSocket Host', () => {
    const outbound = toV2rayOutbound(
      { type: 'vless', server: 'exit1.example.test', server_port: 443, uuid: UUID, tls: { enabled: true } },
      EXIT_IP,
      'proxy',
    );
    assert.deepEqual(outbound.settings.vnext, [
      { address: EXIT_IP, port: 443, users: [{ id: UUID, encryption: 'none' }] },
    ]);
    assert.equal(outbound.streamSettings?.tlsSettings?.serverName, 'exit1.example.test');
    assert.equal(outbound.streamSettings?.sockopt, undefined);
    const ws = toV2rayOutbound(
      { type: 'vmess', server: 'exit1.example.test', server_port: 80, uuid: UUID, transport: { type: 'ws' } },
      EXIT_IP,
      'proxy',
    );
    assert.deepEqual(ws.streamSettings?.wsSettings, { path: '/', headers: { Host: 'exit1.example.test' } });
    const byIp = toV2rayOutbound(
      { type: 'vmess', server: EXIT_IP, server_port: 80, uuid: UUID, transport: { type: 'ws', path: '/x' } },
      EXIT_IP,
      'proxy',
    );
    assert.deepEqual(byIp.streamSettings?.wsSettings, { path: '/x' });
  });

  it('refuses a server address that is not an IP literal', () => {
    assert.throws(
      () =>
        toV2rayOutbound({ type: 'socks', server: 'a.example.test', server_port: 1 }, 'a.example.test', 'p'),
      /not an IP literal/,
    );
  });
});

describe('v2ray gateway and test configs (golden)', () => {
  it('gateway config', async () => {
    await assertGolden(
      'gateway-config.golden.json',
      v2rayEngine.renderGatewayConfig(gatewayParams(vmessWsTls.upstream)),
    );
  });

  it('gateway config without sniffing', () => {
    const config = v2rayGatewayConfig({ ...gatewayParams(vmessWsTls.upstream), sniffing: false });
    assert.equal(config.inbounds[0]?.sniffing, undefined);
  });

  for (const protocol of ['socks', 'http'] as const) {
    it(`test config with a ${protocol} probe inbound`, async () => {
      await assertGolden(
        `test-config-${protocol}.golden.json`,
        v2rayEngine.renderTestConfig(testParams(shadowsocks.upstream, protocol)),
      );
    });
  }

  it('sends DNS only through the upstream in every config', () => {
    for (const config of [
      v2rayGatewayConfig(gatewayParams(vmessWsTls.upstream)),
      v2rayTestConfig(testParams(vmessWsTls.upstream, 'socks')),
    ]) {
      assert.equal(config.outbounds[0]?.tag, 'proxy', 'the upstream is the default outbound');
      assert.deepEqual(
        config.outbounds.map((o) => o.protocol),
        ['vmess', 'dns'],
        'no freedom (direct) outbound exists',
      );
      assert.deepEqual(config.outbounds[1]?.proxySettings, { tag: 'proxy' });
      assert.deepEqual(config.dns.servers, [DNS.dohUrl]);
      assert.ok(
        config.routing.rules.some((r) => r.inboundTag.includes(config.dns.tag) && r.outboundTag === 'proxy'),
      );
    }
  });

  it("sends the probe's zone to the probe's DoH and every other name to the tunnel's resolver", () => {
    const probeDoh = 'https://203.0.113.10/dns-query';
    const config = v2rayGatewayConfig({
      ...gatewayParams(vmessWsTls.upstream),
      dns: {
        ...DNS,
        dohUrl: 'https://203.0.113.53/dns-query',
        zones: [{ zone: 'probe.test', dohUrl: probeDoh }],
      },
    });
    // The resolver first: v2ray would otherwise take the probe's empty answer for every name outside its zone.
    assert.deepEqual(config.dns.servers, [
      'https://203.0.113.53/dns-query',
      { address: probeDoh, domains: ['domain:probe.test'] },
    ]);
    assert.throws(
      () =>
        v2rayGatewayConfig({
          ...gatewayParams(vmessWsTls.upstream),
          dns: { ...DNS, zones: [{ zone: 'probe.test', dohUrl: 'https+local://203.0.113.10/dns-query' }] },
        }),
      /dohUrl/,
    );
  });

  it('marks the upstream socket in the gateway, not in the control-plane test', () => {
    assert.deepEqual(
      v2rayGatewayConfig(gatewayParams(vmessWsTls.upstream)).outbounds[0]?.streamSettings?.sockopt,
      {
        mark: 0xff,
      },
    );
    assert.equal(
      v2rayTestConfig(testParams(vmessWsTls.upstream, 'http')).outbounds[0]?.streamSettings?.sockopt,
      undefined,
    );
  });

  it('rejects settings that would leak or cannot work', () => {
    const base = gatewayParams(vmessWsTls.upstream);
    for (const dohUrl of [
      'https+local://1.1.1.1/dns-query',
      'localhost',
      '203.0.113.10',
      'http://1.1.1.1/dns-query',
    ]) {
      assert.throws(() => v2rayGatewayConfig({ ...base, dns: { ...DNS, dohUrl } }), /dohUrl/);
    }
    assert.throws(
      () =>
        v2rayGatewayConfig({
          ...base,
          dns: { ...DNS, tcpResolver: { address: 'dns.example.test', port: 53 } },
        }),
      /tcpResolver/,
    );
    assert.throws(() => v2rayGatewayConfig({ ...base, transparentPort: 0 }), /transparentPort/);
    assert.throws(() => v2rayGatewayConfig({ ...base, socketMark: 0 }), /socketMark/);
    assert.throws(
      () => v2rayTestConfig({ ...testParams(vmessWsTls.upstream, 'socks'), dnsPort: 20801 }),
      /must differ/,
    );
  });
});

describe('gateway firewall (golden)', () => {
  it('TCP-only upstream', async () => {
    await assertGolden(
      'gateway-firewall-vmess.golden.nft',
      renderGatewayFirewall(firewallParams(vmessWsTls)),
    );
  });

  it('upstream that also takes UDP', async () => {
    await assertGolden(
      'gateway-firewall-shadowsocks.golden.nft',
      renderGatewayFirewall(firewallParams(shadowsocks)),
    );
  });

  it('matches an IPv6 upstream with ip6', () => {
    const params = firewallParams(vmessWsTls);
    const text = renderGatewayFirewall({
      ...params,
      upstream: { ...params.upstream, address: '2001:db8::21' },
    });
    assert.match(text, /meta mark 0x000000ff oifname "eth0" ip6 daddr 2001:db8::21 tcp dport 10445 accept/);
  });

  it('refuses parameters that would inject into or break the ruleset', () => {
    const params = firewallParams(vmessWsTls);
    const bad = [
      { ...params, workspaceInterface: 'eth1" accept' },
      { ...params, uplinkInterface: 'a-very-long-interface-name' },
      { ...params, table: 'x; flush ruleset' },
      { ...params, upstream: { ...params.upstream, address: 'exit1.example.test' } },
      { ...params, upstream: { ...params.upstream, protocols: [] } },
      { ...params, tproxyMark: 0xff },
      { ...params, dnsPort: 70000 },
    ];
    for (const input of bad) assert.throws(() => renderGatewayFirewall(input), TypeError);
  });
});

describe('golden files', () => {
  it('has no file that no test compares', async () => {
    const files = (await readdir(goldenDir)).filter((file) => file.includes('.golden.'));
    const expected = [
      ...VARIANTS.map((v) => `outbound-${v.name}.golden.json`),
      'gateway-config.golden.json',
      'test-config-socks.golden.json',
      'test-config-http.golden.json',
      'gateway-firewall-vmess.golden.nft',
      'gateway-firewall-shadowsocks.golden.nft',
    ];
    assert.deepEqual(files.sort(), expected.sort());
  });
});
