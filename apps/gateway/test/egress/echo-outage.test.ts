import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { ensureLab, labUnavailable } from '../../../../test/lab/lab.js';
import { TunnelEgressTester } from '../../src/egress/egress-tester.js';
import { v2rayEngine } from '../../src/egress/v2ray-engine.js';
import { labPublicEgressEnv, labPublicEgressSettings } from '../helpers/lab-egress.js';
import { type LabGateway, startLabGateway } from '../helpers/lab-gateway.js';

/** A lab address nothing answers: an IP echo provider that is down. */
const DOWN_ECHO = 'https://203.0.113.99/';

/**
 * Hardening issue, point 2: every echo had to answer, so one public provider's outage failed every host start
 * and the egress test of every upstream (and could fail over healthy exits). An echo that does not answer is now
 * its own outcome: enough answers that all agree pass (EGRESS_EXIT_IP_MIN_ANSWERS, default 1), and the start's
 * event names the provider that was out.
 */
describe("one IP echo provider's outage", { skip: labUnavailable(), timeout: 600_000 }, () => {
  const gateways: LabGateway[] = [];
  after(async () => {
    for (const gateway of gateways) await gateway.close();
  });

  it('the egress test passes with one of two echoes down, and not when two answers are wanted', async (t) => {
    const lab = await ensureLab();
    if (!lab.public) return t.skip('the running lab has no public stand-ins (lab.sh up builds them)');
    const exit = lab.exits[0]!;
    const settings = {
      ...labPublicEgressSettings(lab),
      exitIpUrls: [lab.public.resolver.traceUrl, DOWN_ECHO],
    };
    const result = await new TunnelEgressTester({ engine: v2rayEngine, settings }).test(
      exit.variants['vmess-tcp'].proxyConfig as never,
      exit.address,
    );
    assert.equal(result.ok, true, JSON.stringify(result.checks));
    assert.equal(result.checks.exit_ip.observed, exit.address);
    const strict = await new TunnelEgressTester({
      engine: v2rayEngine,
      settings: { ...settings, minEchoAnswers: 2 },
    }).test(exit.variants['vmess-tcp'].proxyConfig as never, exit.address);
    assert.equal(strict.checks.connectivity.ok, true, 'one echo answering is connectivity');
    assert.equal(strict.checks.exit_ip.ok, false);
    assert.match(strict.checks.exit_ip.error ?? '', /fewer than 2 IP echoes answered .*203\.0\.113\.99/);
  });

  it('a host starts with one echo down, and its start event says which was out', async (t) => {
    const lab = await ensureLab();
    if (!lab.public) return t.skip('the running lab has no public stand-ins (lab.sh up builds them)');
    const gateway = await startLabGateway({
      ...labPublicEgressEnv(lab),
      EGRESS_EXIT_IP_URLS: `${lab.public.resolver.traceUrl},${DOWN_ECHO}`,
    });
    gateways.push(gateway);
    const user = await gateway.t.createUser('echo-outage');
    const host = await gateway.createHost(user.id);
    await gateway.startHost(host.id);
    const started = (await gateway.t.request('GET', `/v1/admin/events?type=host.started&host_id=${host.id}`))
      .body.events[0];
    assert.deepEqual(
      started.data.echoes_out.map((entry: string) => entry.split(' ')[0]),
      [DOWN_ECHO],
    );
    assert.match(
      started.message,
      /verified without the IP echoes that were out: https:\/\/203\.0\.113\.99\//,
    );
  });
});
