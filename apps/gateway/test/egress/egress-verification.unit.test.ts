import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import dnsPacket from 'dns-packet';
import { ConfigError, EGRESS_DEFAULTS, egressSettingsFrom } from '../../src/config.js';
import { TunnelEgressTester } from '../../src/egress/egress-tester.js';
import {
  describeVerification,
  echoOutages,
  exitVerdict,
  observedExit,
  probeLogVerdict,
  trustFor,
  tunnelDns,
  verificationPlan,
  whoamiVerdict,
} from '../../src/egress/egress-verification.js';
import { decodeReply, encodeQuery, parseEcho } from '../../src/egress/probe-client.js';
import { v2rayEngine } from '../../src/egress/v2ray-engine.js';

const EXIT = '198.51.100.21';

function txtReply(text: string, rcode = 0): Buffer {
  return dnsPacket.encode({
    id: 7,
    type: 'response',
    flags: rcode,
    questions: [{ type: 'TXT', name: 'whoami.cloudflare', class: 'CH' }],
    answers: rcode === 0 ? [{ type: 'TXT', name: 'whoami.cloudflare', class: 'CH', data: [text] }] : [],
  });
}

describe('egress settings', () => {
  it('verifies against public endpoints when nothing is set', () => {
    const settings = egressSettingsFrom({});
    assert.equal(settings.probe, null);
    assert.equal(settings.dohUrl, EGRESS_DEFAULTS.dohUrl);
    assert.deepEqual(settings.dnsServer, { address: '1.1.1.1', port: 53 });
    assert.equal(settings.dnsWhoami, 'whoami.cloudflare');
    assert.deepEqual(settings.exitIpUrls, [...EGRESS_DEFAULTS.exitIpUrls]);
    assert.match(
      describeVerification(settings),
      /^egress verification: public endpoints, exit IP from https:\/\/1\.1\.1\.1/,
    );
  });

  it('uses the own probe over HTTPS beside the public echoes, its CA pinned, and for its zone', (t) => {
    const caDir = mkdtempSync(path.join(tmpdir(), 'ccp-probe-ca-'));
    t.after(() => rmSync(caDir, { recursive: true, force: true }));
    const probeCa = path.join(caDir, 'probe-ca.pem');
    writeFileSync(probeCa, 'probe CA\n');
    const settings = egressSettingsFrom({
      EGRESS_PROBE_URL: 'https://203.0.113.10/ip',
      EGRESS_PROBE_DNS_ZONE: 'probe.example.com.',
      EGRESS_PROBE_DOH_URL: 'https://203.0.113.10/dns-query',
      EGRESS_PROBE_TOKEN: 'secret-token',
      EGRESS_PROBE_CA_FILE: probeCa,
    });
    // The public HTTPS echoes stay: each is one more party the upstream cannot answer for.
    assert.deepEqual(settings.exitIpUrls, ['https://203.0.113.10/ip', ...EGRESS_DEFAULTS.exitIpUrls]);
    assert.deepEqual(tunnelDns(settings).zones, [
      { zone: 'probe.example.com', dohUrl: 'https://203.0.113.10/dns-query' },
    ]);
    assert.equal(tunnelDns(settings).dohUrl, EGRESS_DEFAULTS.dohUrl, 'other names use the public resolver');
    const plan = verificationPlan(settings);
    assert.deepEqual(trustFor(plan, 'https://203.0.113.10/ip'), { extra: null, pinned: 'probe CA\n' });
    assert.deepEqual(trustFor(plan, 'https://1.1.1.1/dns-query'), { extra: null, pinned: null });
    assert.deepEqual(plan.whoami, {
      name: 'whoami.cloudflare',
      dohUrl: EGRESS_DEFAULTS.dohUrl,
      server: { address: '1.1.1.1', port: 53 },
    });
    const line = describeVerification(settings);
    assert.match(line, /own probe https:\/\/203\.0\.113\.10\/ip \(zone probe\.example\.com, its CA pinned\)/);
    assert.match(line, /DNS path by whoami\.cloudflare over DoH/);
    assert.doesNotMatch(line, /secret-token/);
  });

  it('refuses a probe over plain HTTP, saying how to serve it over HTTPS', () => {
    assert.throws(
      () =>
        egressSettingsFrom({
          EGRESS_PROBE_URL: 'http://203.0.113.10/ip',
          EGRESS_PROBE_DNS_ZONE: 'probe.test',
          EGRESS_PROBE_DOH_URL: 'https://203.0.113.10/dns-query',
        }),
      /EGRESS_PROBE_URL must be https:\/\/ .*the upstream can answer the probe's IP echo itself.*--tls-cert and --tls-key.*EGRESS_PROBE_CA_FILE/,
    );
    assert.throws(
      () =>
        egressSettingsFrom({
          EGRESS_PROBE_URL: 'https://probe.example.com/ip',
          EGRESS_PROBE_DNS_ZONE: 'probe.test',
          EGRESS_PROBE_DOH_URL: 'https://203.0.113.10/dns-query',
          EGRESS_PROBE_CA_FILE: '/nonexistent/probe-ca.pem',
        }),
      /https:\/\/ URL whose host is an IPv4 address[\s\S]*EGRESS_PROBE_CA_FILE: no such file/,
    );
  });

  it('names every setting that is wrong, and the one that is gone', () => {
    assert.throws(
      () =>
        egressSettingsFrom({
          EGRESS_PROBE_DNS_SERVER: '203.0.113.10:53',
          EGRESS_DOH_URL: 'https://dns.example/dns-query',
          EGRESS_DNS_SERVER: 'one.one.one.one',
          EGRESS_EXIT_IP_URLS: 'ftp://203.0.113.5/',
          EGRESS_PROBE_DNS_ZONE: 'probe.test',
          EGRESS_PROBE_CA_FILE: '/etc/hostname',
          EGRESS_TLS_CA_FILE: '/nonexistent/ca.pem',
        }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        const text = error.problems.join('\n');
        for (const name of [
          'EGRESS_PROBE_DNS_SERVER is no longer used',
          'EGRESS_DOH_URL must be an https:// URL whose host is an IP address',
          'EGRESS_DNS_SERVER must be an IPv4 address',
          'EGRESS_EXIT_IP_URLS must list',
          'EGRESS_PROBE_DNS_ZONE, EGRESS_PROBE_CA_FILE only apply with EGRESS_PROBE_URL',
          'EGRESS_TLS_CA_FILE: no such file',
        ])
          assert.ok(text.includes(name), `${name} in:\n${text}`);
        return true;
      },
    );
    assert.throws(
      () => egressSettingsFrom({ EGRESS_PROBE_URL: 'https://203.0.113.10/ip' }),
      /EGRESS_PROBE_DNS_ZONE must name the probe's zone[\s\S]*EGRESS_PROBE_DOH_URL must name/,
    );
    assert.equal(egressSettingsFrom({ EGRESS_DNS_WHOAMI: 'off' }).dnsWhoami, null);
  });
});

describe('exit-IP verdicts', () => {
  it('reads a bare address, a trace and JSON', () => {
    assert.equal(parseEcho('198.51.100.21\n'), EXIT);
    assert.equal(parseEcho('fl=ccp\nh=1.1.1.1\nip=198.51.100.21\nts=1\nvisit_scheme=https\n'), EXIT);
    assert.equal(parseEcho('{"ip":"2001:db8::5"}'), '2001:db8::5');
    assert.equal(parseEcho('<html>blocked</html>'), null);
    assert.equal(parseEcho('ip=not-an-address'), null);
  });

  it('wants every echo that answers to see the declared exit', () => {
    const trace = { url: 'https://203.0.113.53/cdn-cgi/trace', status: 200, body: `ip=${EXIT}\n` };
    const checkip = { url: 'https://checkip.public.test/', status: 200, body: `${EXIT}\n` };
    assert.equal(exitVerdict([trace, checkip], EXIT), null);
    const other = { ...checkip, body: '198.51.100.37\n' };
    assert.deepEqual(exitVerdict([trace, other], EXIT), {
      code: 'exit_ip_mismatch',
      message: `https://checkip.public.test/ sees the traffic from 198.51.100.37, not the declared ${EXIT}`,
    });
    assert.equal(observedExit([trace, other], EXIT), '198.51.100.37');
    assert.equal(observedExit([trace, other], EXIT), '198.51.100.37');
  });

  it("takes one provider's outage as its own outcome: enough answers that agree pass, a disagreeing one fails", () => {
    const trace = { url: 'https://203.0.113.53/cdn-cgi/trace', status: 200, body: `ip=${EXIT}\n` };
    const down = { url: 'https://checkip.public.test/', error: 'timed out' };
    // One of two out, the default minimum of one answer: passes, and the outage is named.
    assert.equal(exitVerdict([trace, down], EXIT), null);
    assert.deepEqual(echoOutages([trace, down]), ['https://checkip.public.test/ (timed out)']);
    assert.deepEqual(echoOutages([trace, { ...trace, url: 'https://x.test/', status: 503 }]), [
      'https://x.test/ (HTTP 503)',
    ]);
    // The one that answers sees another address: fails, whatever the other did.
    assert.equal(
      exitVerdict([{ ...trace, body: 'ip=198.51.100.37\n' }, down], EXIT)?.code,
      'exit_ip_mismatch',
    );
    // Two answers wanted (EGRESS_EXIT_IP_MIN_ANSWERS=2): one out fails and says which.
    const short = exitVerdict([trace, down], EXIT, 2);
    assert.equal(short?.code, 'upstream_unreachable');
    assert.match(short?.message ?? '', /fewer than 2 IP echoes answered .*checkip\.public\.test.*timed out/);
    // None answers, or none with an address in it.
    assert.match(exitVerdict([down], EXIT)?.message ?? '', /^no IP echo answered/);
    assert.equal(exitVerdict([{ ...trace, body: 'hello' }], EXIT)?.code, 'upstream_unreachable');
  });
});

describe('DNS path verdicts', () => {
  it('asks whoami in class CH', () => {
    const query = dnsPacket.decode(encodeQuery('whoami.cloudflare', 'TXT', true));
    assert.equal(query.questions?.[0]?.class, 'CH');
    assert.equal(query.questions?.[0]?.type, 'TXT');
  });

  it('passes when the resolver saw the exit, and calls any other asker a leak', () => {
    const ok = decodeReply(txtReply(EXIT), undefined, 'whoami');
    assert.equal(whoamiVerdict(ok, 'whoami.cloudflare', EXIT, 'doh'), null);
    const leaked = whoamiVerdict(
      decodeReply(txtReply('198.51.100.2'), undefined, 'w'),
      'whoami.cloudflare',
      EXIT,
      'doh',
    );
    assert.equal(leaked?.code, 'dns_leak');
    assert.match(
      leaked?.message ?? '',
      /DoH resolver saw .* over DoH from 198\.51\.100\.2, not 198\.51\.100\.21/,
    );
    const failed = whoamiVerdict(decodeReply(txtReply('x', 5), undefined, 'w'), 'n', EXIT, 'doh');
    assert.equal(failed?.code, 'dns_failed');
    assert.match(failed?.message ?? '', /EGRESS_DOH_URL/);
    const silent = whoamiVerdict(decodeReply(undefined, 'timed out', 'w'), 'n', EXIT, 'tunnel');
    assert.equal(silent?.code, 'dns_failed');
    assert.match(silent?.message ?? '', /EGRESS_DNS_SERVER/);
    assert.equal(
      whoamiVerdict(decodeReply(txtReply('hello'), undefined, 'w'), 'n', EXIT, 'doh')?.code,
      'dns_failed',
    );
  });

  it('needs the probe to have seen the name, from the exit only', () => {
    assert.equal(probeLogVerdict([EXIT, EXIT], 'n.probe.test', EXIT), null);
    assert.equal(probeLogVerdict([], 'n.probe.test', EXIT)?.code, 'dns_leak');
    assert.match(probeLogVerdict([EXIT, '203.0.113.53'], 'n', EXIT)?.message ?? '', /from 203\.0\.113\.53/);
  });
});

describe('the egress test without its tunnel engine', () => {
  it('says the engine is not installed, not that it was slow', async () => {
    const tester = new TunnelEgressTester({
      engine: v2rayEngine,
      settings: { ...egressSettingsFrom({}), v2rayCommand: '/nonexistent/v2ray' },
    });
    const result = await tester.test(
      { type: 'socks', server: '198.51.100.21', server_port: 1080, version: '5' } as never,
      EXIT,
    );
    assert.equal(result.ok, false);
    for (const check of Object.values(result.checks))
      assert.match(
        check.error ?? '',
        /tunnel engine \/nonexistent\/v2ray is not installed.*deploy\/setup\.sh/,
      );
  });
});
