/**
 * Issue 30, metering: the bytes a workspace moves through its upstream are counted in its egress gateway and
 * reach the API and /metrics per host, per egress IP and per user, agreeing with what was moved (within 2 % or
 * 64 KiB), through each of the six upstream protocols, also for bytes moved while the gateway was down and
 * across its restart. Real workspaces (one per protocol, moving at the same time, as their own user), real
 * tunnels to the lab's exits, the built gateway as its own process.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import {
  ensureLab,
  type LabDescription,
  type LabExit,
  type LabVariant,
  type VariantName,
  variant,
} from '../../../../test/lab/lab.js';
import { removeDataDir } from '../../../../test/support/data-dir.js';
import { needs } from '../../../../test/support/needs.js';
import {
  api,
  eventually,
  type GatewayProcess,
  startLabGatewayProcessWithHost,
  waitForTask,
} from '../helpers/gateway-process.js';
import { buildTestImages } from '../helpers/lab-egress.js';
import { removeHostResources } from '../helpers/lab-gateway.js';

const exec = promisify(execFile);
const DOWNLOAD = 3_000_000;
const UPLOAD = 2_000_000;
/** Header bytes per request, below Node's 16 KiB limit. */
const PAD = 15_000;

/** Within 2 % or 64 KiB of what was moved. */
function agrees(counted: number, moved: number, what: string): void {
  const slack = Math.max(moved * 0.02, 64 * 1024);
  const figures = `${what}: counted ${counted} bytes, moved ${moved}`;
  assert.ok(Math.abs(counted - moved) <= slack, figures);
  // In the test's output, for the record.
  console.log(`# ${figures}`);
}

/** One workspace per protocol: VMess (the first host's), then these on the same exit; Trojan comes by a switch. */
const PROTOCOLS: { label: string; variant: VariantName }[] = [
  { label: 'SOCKS5', variant: 'socks-auth' },
  { label: 'HTTP', variant: 'http-auth' },
  { label: 'Shadowsocks', variant: 'ss-chacha20-ietf-poly1305' },
  { label: 'VLESS', variant: 'vless-tls' },
];

interface MeteredHost {
  protocol: string;
  hostId: string;
  userId: string;
  username: string;
  egressIpId: string;
}

interface Moved {
  sent: number;
  received: number;
}

describe('egress metering through real tunnels', { skip: needs('lab', 'docker'), timeout: 900_000 }, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-meter-'));
  let lab: LabDescription;
  let gateway: GatewayProcess;
  let url: string;
  let token: string;
  /** The VMess host first; it is also the one the restart's and the switch's tests look at alone. */
  const hosts: MeteredHost[] = [];

  before(async () => {
    [, lab] = await Promise.all([buildTestImages(), ensureLab()]);
    const started = await startLabGatewayProcessWithHost(lab, work, 'meter', { EGRESS_METER_SECONDS: '1' });
    ({ gateway, url, token } = started);
    const vmess = (await api(url, token, 'GET', `/v1/admin/hosts/${started.hostId}`)).body;
    hosts.push({
      protocol: 'VMess',
      hostId: started.hostId,
      userId: started.user.id,
      username: started.user.username,
      egressIpId: vmess.bindings[0].egress_ip_id,
    });
    for (const { label, variant: name } of PROTOCOLS) hosts.push(await createHost(label, variant(lab, name)));
    // All at once: each start is mostly waiting for its own containers and path check.
    await Promise.all(
      hosts.map(async ({ protocol, hostId }) => {
        const start = await api(url, token, 'POST', `/v1/admin/hosts/${hostId}/start`);
        assert.equal(start.status, 202, JSON.stringify(start.body));
        const task = await waitForTask(url, token, start.body.task_id);
        assert.equal(task.status, 'succeeded', `${protocol}: ${JSON.stringify(task.error)}`);
      }),
    );
  });

  after(async () => {
    await gateway?.kill('SIGTERM');
    await removeHostResources(hosts.map((host) => host.hostId));
    removeDataDir(work);
  });

  /** A user of their own with a host bound to an egress IP of this protocol (not started). */
  const createHost = async (
    protocol: string,
    through: LabVariant & { exit: LabExit },
  ): Promise<MeteredHost> => {
    const egress = await api(url, token, 'POST', '/v1/admin/egress-ips', {
      label: `lab ${protocol}`,
      ip_address: through.exit.address,
      proxy_config: through.proxyConfig,
    });
    assert.equal(egress.status, 201, JSON.stringify(egress.body));
    const username = `meter${protocol.slice(0, 4).toLowerCase()}${randomBytes(2).toString('hex')}`;
    const user = await api(url, token, 'POST', '/v1/admin/users', {
      username,
      password: 'a-long-enough-password',
    });
    assert.equal(user.status, 201, JSON.stringify(user.body));
    const host = await api(url, token, 'POST', '/v1/admin/hosts', {
      user_id: user.body.id,
      egress_ip_id: egress.body.id,
    });
    assert.equal(host.status, 201, JSON.stringify(host.body));
    return { protocol, hostId: host.body.id, userId: user.body.id, username, egressIpId: egress.body.id };
  };

  const totals = async () => {
    const read = await api(url, token, 'GET', '/v1/admin/egress-traffic');
    assert.equal(read.status, 200, JSON.stringify(read.body));
    return read.body;
  };
  const figures = (rows: Record<string, string | number>[], key: string, id: string): Moved => {
    const row = rows.find((r) => r[key] === id);
    return { sent: Number(row?.sent_bytes ?? 0), received: Number(row?.received_bytes ?? 0) };
  };
  const hostFigures = async () => {
    const read = await totals();
    return hosts.map((host) => figures(read.hosts, 'host_id', host.hostId));
  };
  /** Every host's figures once two samples in a row (1 s apart) added nothing to any of them. */
  const settled = async () => {
    let last = JSON.stringify(await hostFigures());
    return eventually(
      'the figures to settle',
      async () => {
        await new Promise((resolve) => setTimeout(resolve, 1500));
        const now = await hostFigures();
        const same = JSON.stringify(now) === last;
        last = JSON.stringify(now);
        return same ? now : undefined;
      },
      60_000,
    );
  };
  /**
   * In the host's workspace, as its user: downloads, then sends about UPLOAD bytes as request headers (the lab's
   * web server reads every request to its end, and answers none with a body it did not ask for); the bytes curl
   * says it sent and received.
   */
  const move = async (host: MeteredHost): Promise<Moved> => {
    const base = lab.internet.httpUrl;
    const requests = Math.ceil(UPLOAD / PAD);
    const script = [
      `curl -sS --max-time 60 -o /dev/null -w '%{size_request} %{size_header} %{size_download}\\n' ${base}/bytes/${DOWNLOAD}`,
      `pad=$(head -c ${PAD} /dev/zero | tr '\\0' a)`,
      `curl -sS --max-time 120 -H "x-pad: $pad" -w '%{size_request} %{size_header} %{size_download}\\n'${` -o /dev/null ${base}/ip`.repeat(requests)}`,
    ].join(' && ');
    const { stdout } = await exec('docker', [
      'exec',
      '--user',
      host.username,
      `ccp-ws-${host.hostId}`,
      'sh',
      '-c',
      script,
    ]);
    const transfers = stdout
      .trim()
      .split('\n')
      .map((line) => line.split(' ').map(Number));
    assert.equal(transfers.length, requests + 1, `${host.protocol}: ${stdout}`);
    assert.equal(transfers[0]![2], DOWNLOAD, `${host.protocol}: curl downloaded ${transfers[0]![2]}`);
    const sum = (pick: (t: number[]) => number) => transfers.reduce((total, t) => total + pick(t), 0);
    const moved = { sent: sum((t) => t[0]!), received: sum((t) => t[1]! + t[2]!) };
    assert.ok(moved.sent >= UPLOAD, `${host.protocol}: sent only ${moved.sent}`);
    return moved;
  };
  /**
   * Every host moves at once (`around` runs just before and after); what each counted since agrees with what it
   * moved.
   */
  const moveAndCompare = async (
    when: string,
    around: { before?: () => Promise<void>; after?: () => Promise<void> } = {},
  ) => {
    const before = await settled();
    await around.before?.();
    const moved = await Promise.all(hosts.map(move));
    await around.after?.();
    const after = await settled();
    hosts.forEach(({ protocol }, i) => {
      agrees(after[i]!.received - before[i]!.received, moved[i]!.received, `${protocol}: received${when}`);
      agrees(after[i]!.sent - before[i]!.sent, moved[i]!.sent, `${protocol}: sent${when}`);
    });
    return after;
  };

  it('counts what each workspace moves through each protocol, per host, egress IP and user, in the API and /metrics', async () => {
    const after = await moveAndCompare('');
    const read = await totals();
    const metrics = await (
      await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${token}` } })
    ).text();
    for (const [i, host] of hosts.entries()) {
      // Each egress IP and each user carried this one host, since the host started.
      assert.deepEqual(figures(read.egress_ips, 'egress_ip_id', host.egressIpId), after[i], host.protocol);
      assert.deepEqual(figures(read.users, 'user_id', host.userId), after[i], host.protocol);
      const hours = await api(url, token, 'GET', `/v1/admin/egress-traffic/hours?host_id=${host.hostId}`);
      const summed = hours.body.hours.reduce(
        (sum: number, h: { received_bytes: number }) => sum + h.received_bytes,
        0,
      );
      assert.equal(summed, after[i]!.received, host.protocol);
      assert.match(
        metrics,
        new RegExp(
          `ccp_host_egress_bytes_total\\{host_id="${host.hostId}",direction="received"\\} ${after[i]!.received}\\b`,
        ),
        host.protocol,
      );
      assert.match(
        metrics,
        new RegExp(
          `ccp_egress_ip_bytes_total\\{egress_ip_id="${host.egressIpId}",direction="sent"\\} ${after[i]!.sent}\\b`,
        ),
        host.protocol,
      );
    }
  });

  it('bytes moved while the gateway is down are counted once it is back', async () => {
    await moveAndCompare(' across the restart', {
      before: () => gateway.kill('SIGKILL'),
      after: () => gateway.start(),
    });
  });

  it('after a switch to another egress IP (Trojan), its bytes are counted there and the old one keeps its own', async () => {
    const vmess = hosts[0]!;
    const exit = lab.exits[1]!;
    const second = await api(url, token, 'POST', '/v1/admin/egress-ips', {
      label: 'lab trojan',
      ip_address: exit.address,
      proxy_config: exit.variants['trojan-tls'].proxyConfig,
    });
    assert.equal(second.status, 201, JSON.stringify(second.body));
    const host = (await api(url, token, 'GET', `/v1/admin/hosts/${vmess.hostId}`)).body;
    const first = host.bindings[0];
    const bind = await api(url, token, 'POST', '/v1/admin/bindings', {
      host_id: vmess.hostId,
      egress_ip_id: second.body.id,
    });
    assert.equal(bind.status, 201, JSON.stringify(bind.body));
    // The first binding goes: the standby carries the traffic now, switched while the host runs.
    assert.equal((await api(url, token, 'DELETE', `/v1/admin/bindings/${first.id}`)).status, 204);
    await eventually(
      'the switch to the second egress IP',
      async () => {
        const echo = await exec('docker', [
          'exec',
          '--user',
          vmess.username,
          `ccp-ws-${vmess.hostId}`,
          'curl',
          '-sS',
          '--max-time',
          '5',
          `${lab.internet.httpUrl}/ip`,
        ]);
        return echo.stdout.trim() === exit.address;
      },
      180_000,
    );
    const egressOf = async (id: string) => figures((await totals()).egress_ips, 'egress_ip_id', id);
    await settled();
    const [firstBefore, secondBefore] = [await egressOf(first.egress_ip_id), await egressOf(second.body.id)];
    const moved = await move(vmess);
    await settled();
    const [firstAfter, secondAfter] = [await egressOf(first.egress_ip_id), await egressOf(second.body.id)];
    agrees(secondAfter.received - secondBefore.received, moved.received, 'Trojan: received');
    agrees(secondAfter.sent - secondBefore.sent, moved.sent, 'Trojan: sent');
    assert.deepEqual(firstAfter, firstBefore, 'the old egress IP counted nothing more');
  });

  it('a user sees their own figures', async () => {
    const { username, hostId } = hosts[0]!;
    const login = await api(url, null, 'POST', '/v1/auth/login', {
      username,
      password: 'a-long-enough-password',
    });
    const own = await api(url, login.body.token, 'GET', '/v1/user/egress-traffic');
    assert.equal(own.status, 200, JSON.stringify(own.body));
    assert.deepEqual(
      own.body.hosts.map((h: { host_id: string }) => h.host_id),
      [hostId],
    );
    assert.ok(own.body.hosts[0].received_bytes >= 2 * DOWNLOAD);
  });
});
