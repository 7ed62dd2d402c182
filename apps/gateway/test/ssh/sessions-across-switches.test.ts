/**
 * Issue 17: an open SSH session outlives every change of its host's upstream. The relay into the workspace
 * must not live in the tunnel process that a switch or a failover restarts.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { needs } from '../../../../test/support/needs.js';
import { egressTesterFor } from '../../src/egress/egress-tester.js';
import { v2rayEngine } from '../../src/egress/v2ray-engine.js';
import { type LabGateway, startLabGateway } from '../helpers/lab-gateway.js';
import {
  type LiveSession,
  openLiveSession,
  runClient,
  sshWithPassword,
  until,
  within,
} from '../helpers/openssh.js';
import { TesterWithOutages } from '../helpers/outages.js';

describe('open SSH sessions across upstream changes', {
  skip: needs('lab', 'docker', 'ssh', 'sshpass'),
  timeout: 900_000,
}, () => {
  const tester = new TesterWithOutages();
  let lab: LabGateway;
  let user: { id: string; sshPass: string };
  let host: { id: string; short_id: string };
  let standbyId: string;
  let session: LiveSession;
  let login: string;

  /** The loop's counter: one line every 200 ms, numbered from 1 by the same shell for as long as it lives. */
  const ticks = () => session.lines.filter((line) => /^tick \d+$/.test(line)).map((l) => Number(l.slice(5)));
  const exitSeen = async () => {
    const result = await sshWithPassword(lab.t.gateway.ssh.port, user.sshPass, [
      `${login}@127.0.0.1`,
      `curl -sS --max-time 10 ${lab.lab.internet.httpUrl}/ip`,
    ]);
    assert.equal(result.code, 0, result.stderr);
    return result.stdout.trim();
  };
  /** More ticks arrive after `since`, in sequence with the ones before: the same session, still printing. */
  const keepsPrinting = async (since: number) => {
    await until('five more ticks', () => ticks().length >= since + 5, 30_000);
    const seen = ticks();
    assert.deepEqual(
      seen,
      seen.map((_, index) => index + 1),
      'the counter never restarted or skipped',
    );
    assert.equal(session.child.exitCode, null, `the session ended: ${session.stderr()}`);
  };

  before(async () => {
    lab = await startLabGateway({}, 'sqlite', { egressTester: tester });
    tester.real = egressTesterFor(lab.t.gateway.config.egress, v2rayEngine);
    const t = lab.t;
    const name = `sw${randomBytes(3).toString('hex')}`;
    user = await t.createUser(name);
    host = await lab.createHost(user.id);
    login = `${name}+${host.short_id}`;
    const standbyExit = lab.lab.exits[1]!;
    const standby = await t.request('POST', '/v1/admin/egress-ips', {
      body: {
        label: 'lab standby trojan',
        ip_address: standbyExit.address,
        proxy_config: standbyExit.variants['trojan-tls'].proxyConfig,
      },
    });
    assert.equal(standby.status, 201, JSON.stringify(standby.body));
    standbyId = standby.body.id;
    const bound = await t.request('POST', '/v1/admin/bindings', {
      body: { host_id: host.id, egress_ip_id: standbyId },
    });
    assert.equal(bound.status, 201, JSON.stringify(bound.body));
    await within(300_000, 'the workspace start', lab.startHost(host.id));
    session = openLiveSession(t.gateway.ssh.port, user.sshPass, [
      `${login}@127.0.0.1`,
      'i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 0.2; done',
    ]);
    await until('the loop to print', () => ticks().length >= 3, 60_000);
  });

  after(async () => {
    session?.child.kill();
    await lab?.close();
  });

  it('keeps printing while an edit moves the upstream to another protocol', async () => {
    const exit = lab.lab.exits[0]!;
    const edited = await lab.t.request('PUT', `/v1/admin/egress-ips/${lab.egressIpId}`, {
      body: { proxy_config: exit.variants['vless-tcp'].proxyConfig },
    });
    assert.equal(edited.status, 200, JSON.stringify(edited.body));
    await until(
      'the switch to be logged',
      async () =>
        (await lab.t.request('GET', `/v1/admin/events?host_id=${host.id}&type=host.upstream_switched`)).body
          .total === 1,
      120_000,
    );
    await keepsPrinting(ticks().length);
    assert.equal(await exitSeen(), exit.address);
  });

  it('keeps printing while a failover moves the host to its standby exit', async () => {
    tester.down.add(lab.lab.exits[0]!.address);
    await within(
      180_000,
      'the health round',
      lab.t.gateway.lifecycle.checkUpstreams(lab.t.gateway.access.system('test: health round')),
    );
    const failover = await lab.t.request('GET', `/v1/admin/events?host_id=${host.id}&type=host.failover`);
    assert.equal(failover.body.total, 1);
    assert.equal(failover.body.events[0].data.to_egress_ip_id, standbyId);
    const switched = await lab.t.request(
      'GET',
      `/v1/admin/events?host_id=${host.id}&type=host.upstream_switched`,
    );
    assert.equal(switched.body.total, 2, 'the failover switch succeeded');
    await keepsPrinting(ticks().length);
    assert.equal(await exitSeen(), lab.lab.exits[1]!.address);
  });

  it('keeps printing while v2ray is killed in the egress gateway and restarted by its supervisor', async () => {
    const kill = await runClient('docker', [
      'exec',
      `ccp-egress-${host.id}`,
      'sh',
      '-c',
      'kill -KILL "$(cat /run/ccp-egress/v2ray.pid)"',
    ]);
    assert.equal(kill.code, 0, kill.stderr);
    await keepsPrinting(ticks().length);
    await until('the tunnel to come back', async () => (await exitSeen().catch(() => '')) !== '', 30_000);
    assert.equal(await exitSeen(), lab.lab.exits[1]!.address);
  });

  it("after those switches the egress gateway is still Docker's to restart: killed outright, it comes back", async () => {
    const pid = await runClient('docker', ['inspect', '--format', '{{.State.Pid}}', `ccp-egress-${host.id}`]);
    assert.equal(pid.code, 0, pid.stderr);
    // A crash of the whole container (not only v2ray): its restart policy must still hold after the reloads a
    // switch sends it.
    process.kill(Number(pid.stdout.trim()), 'SIGKILL');
    await until(
      'the workspace to leave through its exit again',
      async () => (await exitSeen().catch(() => '')) === lab.lab.exits[1]!.address,
      90_000,
    );
    assert.equal((await lab.t.request('GET', `/v1/admin/hosts/${host.id}`)).body.status, 'running');
  });
});
