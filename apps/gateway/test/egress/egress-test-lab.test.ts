import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ensureLab, type LabDescription } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { TunnelEgressTester } from '../../src/egress/egress-tester.js';
import { v2rayEngine } from '../../src/egress/v2ray-engine.js';
import {
  labEgressEnv,
  labEgressSettings,
  labPublicEgressEnv,
  labPublicEgressSettings,
} from '../helpers/lab-egress.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const skip = needs('lab');

/**
 * The two ways a gateway verifies: its operator's own probe, or (no EGRESS_PROBE_* at all) the public defaults,
 * which the lab stands in for at its own addresses, set through the same variables an operator would use.
 */
const MODES = [
  { mode: 'own probe', env: labEgressEnv },
  { mode: 'public endpoints', env: labPublicEgressEnv },
] as const;

for (const kind of DATABASES) {
  for (const { mode, env } of MODES) {
    describe(`egress test against the lab's six protocols (${kind}, ${mode})`, { skip }, () => {
      let lab: LabDescription;
      let t: TestGateway;
      before(async () => {
        lab = await ensureLab();
        const settings = env(lab);
        assert.equal(
          Object.keys(settings).some((name) => name.startsWith('EGRESS_PROBE_')),
          mode === 'own probe',
        );
        t = await startTestGateway(kind, settings);
      });
      after(() => t?.close());

      const createAndTest = async (proxyConfig: object, ipAddress: string) => {
        const created = await t.request('POST', '/v1/admin/egress-ips', {
          body: { label: 'lab', ip_address: ipAddress, proxy_config: proxyConfig },
        });
        assert.equal(created.status, 201, JSON.stringify(created.body));
        const tested = await t.request('POST', `/v1/admin/egress-ips/${created.body.id}/test`);
        assert.equal(tested.status, 200);
        return { id: created.body.id as string, result: tested.body };
      };

      it('passes all three checks for every protocol and variant', async () => {
        const exit = lab.exits[0]!;
        const protocols = new Set<string>();
        for (const [name, variant] of Object.entries(exit.variants)) {
          const { id, result } = await createAndTest(variant.proxyConfig, exit.address);
          assert.equal(result.ok, true, `${name}: ${JSON.stringify(result.checks)}`);
          assert.equal(result.checks.exit_ip.observed, exit.address, name);
          assert.equal(result.checks.dns_leak.resolver_ip, exit.address, name);
          assert.ok(result.duration_ms < 30_000);
          const stored = await t.request('GET', `/v1/admin/egress-ips/${id}`);
          assert.equal(stored.body.last_test.ok, true);
          protocols.add(variant.protocol);
        }
        assert.deepEqual([...protocols].sort(), ['http', 'shadowsocks', 'socks', 'trojan', 'vless', 'vmess']);
        const events = await t.request('GET', '/v1/admin/events?type=egress_ip.test.passed&limit=500');
        assert.equal(events.body.total, Object.keys(exit.variants).length);
      });

      it('fails the exit-IP check when the declared IP is wrong', async () => {
        const [first, second] = lab.exits;
        const { result } = await createAndTest(first!.variants['vmess-tcp'].proxyConfig, second!.address);
        assert.equal(result.ok, false);
        assert.equal(result.checks.connectivity.ok, true);
        assert.equal(result.checks.exit_ip.ok, false);
        assert.equal(result.checks.exit_ip.observed, first!.address);
        assert.match(
          result.checks.exit_ip.error,
          new RegExp(`not the declared ${second!.address.replaceAll('.', '\\.')}`),
        );
        // The lookups left through the same exit: no leak, a mistyped exit IP, and the DNS line says so.
        assert.doesNotMatch(result.checks.dns_leak.error, /DNS leaked/);
        assert.match(result.checks.dns_leak.error, /not a leak: .* declared exit IP .* looks wrong/);
      });

      it('fails connectivity with a timeout for a wrong UUID, within 30 seconds', async () => {
        const vmess = {
          ...lab.exits[0]!.variants['vmess-tcp'].proxyConfig,
          uuid: '00000000-0000-4000-8000-000000000000',
        };
        const { result } = await createAndTest(vmess, lab.exits[0]!.address);
        assert.equal(result.ok, false);
        assert.equal(result.checks.connectivity.ok, false);
        assert.match(
          result.checks.connectivity.error,
          /closed the connection|accepted the connection, but nothing came back/,
        );
        assert.ok(result.duration_ms <= 30_000, String(result.duration_ms));
        // Nothing passes the upstream, so there is no DNS path to judge: the resolver setting is not blamed.
        assert.match(result.checks.dns_leak.error, /^not checked: nothing passes through the upstream/);
        assert.doesNotMatch(result.checks.dns_leak.error, /EGRESS_DNS_SERVER/);
      });

      it('names the failing hop when the upstream refuses the connection', async () => {
        const down = { ...lab.exits[0]!.variants.socks.proxyConfig, server_port: 9 };
        const { result } = await createAndTest(down, lab.exits[0]!.address);
        assert.equal(result.checks.connectivity.ok, false);
        assert.match(
          result.checks.connectivity.error,
          new RegExp(`upstream ${lab.exits[0]!.address.replaceAll('.', '\\.')}:9 refused the connection`),
        );
        assert.equal(result.checks.dns_leak.ok, false);
        assert.match(result.checks.dns_leak.error, /^not checked/);
        // Told at once by a direct dial, not after the echo's timeout through the tunnel (it took 8-9 s).
        assert.ok(result.duration_ms < 3000, `reported after ${result.duration_ms} ms`);
      });
    });
  }
}

describe('egress test leak detection', { skip }, () => {
  it('fails the DNS check when the tunnel would resolve the probe zone directly (test-only leaking config)', async () => {
    const lab = await ensureLab();
    const tester = new TunnelEgressTester({
      engine: v2rayEngine,
      settings: labEgressSettings(lab),
      // `https+local://` makes v2ray ask the probe's DoH server directly instead of through the upstream.
      alterConfig: (config) =>
        config.replace(
          `"${lab.internet.dohUrl}"`,
          `"${lab.internet.dohUrl.replace('https:', 'https+local:')}"`,
        ),
    });
    const exit = lab.exits[0]!;
    const result = await tester.test(exit.variants['vmess-tcp'].proxyConfig as never, exit.address);
    assert.equal(result.checks.connectivity.ok, true);
    assert.equal(result.checks.exit_ip.ok, true);
    assert.equal(result.checks.dns_leak.ok, false);
    assert.equal(result.checks.dns_leak.resolver_ip, lab.root.address);
    assert.match(result.checks.dns_leak.error ?? '', /DNS leaked/);
  });

  it('fails the DNS check when other record types would leave directly (public endpoints, leaking config)', async (t) => {
    const lab = await ensureLab();
    if (!lab.public) return t.skip('the running lab has no public stand-ins (lab.sh up builds them)');
    const tester = new TunnelEgressTester({
      engine: v2rayEngine,
      settings: labPublicEgressSettings(lab),
      // Without proxySettings, v2ray's DNS outbound dials the resolver itself instead of through the upstream.
      alterConfig: (config) => {
        const parsed = JSON.parse(config) as { outbounds: { protocol: string; proxySettings?: object }[] };
        for (const outbound of parsed.outbounds)
          if (outbound.protocol === 'dns') delete outbound.proxySettings;
        return JSON.stringify(parsed);
      },
    });
    const exit = lab.exits[0]!;
    const result = await tester.test(exit.variants['trojan-tls'].proxyConfig as never, exit.address);
    assert.equal(result.checks.exit_ip.ok, true, JSON.stringify(result.checks));
    assert.equal(result.checks.dns_leak.ok, false);
    assert.equal(result.checks.dns_leak.resolver_ip, lab.root.address);
    assert.match(result.checks.dns_leak.error ?? '', /DNS leaked/);
  });

  it('fails the exit-IP check when one of two echoes sees another address', async (t) => {
    const lab = await ensureLab();
    if (!lab.public) return t.skip('the running lab has no public stand-ins (lab.sh up builds them)');
    // The second echo is asked directly, as a lying or misrouted source would answer: the other exit's address.
    const settings = {
      ...labPublicEgressSettings(lab),
      exitIpUrls: [lab.public.resolver.traceUrl, `${lab.internet.httpUrl}/ip`],
    };
    const second = lab.exits[1]!;
    const tester = new TunnelEgressTester({ engine: v2rayEngine, settings });
    const result = await tester.test(second.variants['vless-tls'].proxyConfig as never, second.address);
    assert.equal(result.checks.connectivity.ok, true);
    assert.equal(result.checks.exit_ip.ok, true, 'both see the exit when both are reached through it');
    const lying = new TunnelEgressTester({
      engine: v2rayEngine,
      settings,
      // Test-only: the probe's address goes straight out instead of through the upstream.
      alterConfig: (config) => {
        const parsed = JSON.parse(config) as {
          outbounds: { tag: string; protocol: string }[];
          routing: { rules: object[] };
        };
        parsed.outbounds.push({ tag: 'direct', protocol: 'freedom' });
        parsed.routing.rules.unshift({ type: 'field', ip: [lab.internet.address], outboundTag: 'direct' });
        return JSON.stringify(parsed);
      },
    });
    const leaked = await lying.test(second.variants['vless-tls'].proxyConfig as never, second.address);
    assert.equal(leaked.checks.exit_ip.ok, false);
    assert.equal(leaked.checks.exit_ip.observed, lab.root.address);
    assert.match(leaked.checks.exit_ip.error ?? '', /sees the traffic from/);
  });
});
