/**
 * Issue 30, metering: the bytes a workspace moves through its upstream are counted in its egress gateway and
 * reach the API and /metrics per host, per egress IP and per user, agreeing with what was moved (within 2 % or
 * 64 KiB), also for bytes moved while the gateway was down and across its restart. Real workspace, real tunnel
 * (the lab's VMess exit), the built gateway as its own process.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { ensureLab, type LabDescription } from '../../../../test/lab/lab.js';
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

describe('egress metering through a real tunnel', { skip: needs('lab', 'docker'), timeout: 900_000 }, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-meter-'));
  let lab: LabDescription;
  let gateway: GatewayProcess;
  let url: string;
  let token: string;
  let hostId: string;
  let userId: string;

  before(async () => {
    [, lab] = await Promise.all([buildTestImages(), ensureLab()]);
    const started = await startLabGatewayProcessWithHost(lab, work, 'meter', { EGRESS_METER_SECONDS: '1' });
    ({ gateway, url, token, hostId } = started);
    userId = started.user.id;
    const start = await api(url, token, 'POST', `/v1/admin/hosts/${hostId}/start`);
    assert.equal(start.status, 202, JSON.stringify(start.body));
    const task = await waitForTask(url, token, start.body.task_id);
    assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
  });

  after(async () => {
    await gateway?.kill('SIGTERM');
    await removeHostResources([hostId].filter(Boolean));
    rmSync(work, { recursive: true, force: true });
  });

  const totals = async () => {
    const read = await api(url, token, 'GET', '/v1/admin/egress-traffic');
    assert.equal(read.status, 200, JSON.stringify(read.body));
    return read.body;
  };
  const hostTotal = async () => {
    const row = (await totals()).hosts.find((h: { host_id: string }) => h.host_id === hostId);
    return { sent: row?.sent_bytes ?? 0, received: row?.received_bytes ?? 0 };
  };
  /** The host's figures once two samples in a row (1 s apart) added nothing. */
  const settled = async () => {
    let last = await hostTotal();
    return eventually(
      'the figures to settle',
      async () => {
        await new Promise((resolve) => setTimeout(resolve, 1500));
        const now = await hostTotal();
        const same = now.sent === last.sent && now.received === last.received;
        last = now;
        return same ? now : undefined;
      },
      60_000,
    );
  };
  /**
   * Downloads, then sends about UPLOAD bytes as request headers (the lab's web server reads every request to its
   * end, and answers none with a body it did not ask for); the bytes curl says it sent and received.
   */
  const move = async () => {
    const base = lab.internet.httpUrl;
    const requests = Math.ceil(UPLOAD / PAD);
    const script = [
      `curl -sS --max-time 60 -o /dev/null -w '%{size_request} %{size_header} %{size_download}\\n' ${base}/bytes/${DOWNLOAD}`,
      `pad=$(head -c ${PAD} /dev/zero | tr '\\0' a)`,
      `curl -sS --max-time 120 -H "x-pad: $pad" -w '%{size_request} %{size_header} %{size_download}\\n'${` -o /dev/null ${base}/ip`.repeat(requests)}`,
    ].join(' && ');
    const { stdout } = await exec('docker', ['exec', `ccp-ws-${hostId}`, 'sh', '-c', script]);
    const transfers = stdout
      .trim()
      .split('\n')
      .map((line) => line.split(' ').map(Number));
    assert.equal(transfers.length, requests + 1, stdout);
    assert.equal(transfers[0]![2], DOWNLOAD, `curl downloaded ${transfers[0]![2]}`);
    const sum = (pick: (t: number[]) => number) => transfers.reduce((total, t) => total + pick(t), 0);
    const moved = { sent: sum((t) => t[0]!), received: sum((t) => t[1]! + t[2]!) };
    assert.ok(moved.sent >= UPLOAD, `sent only ${moved.sent}`);
    return moved;
  };

  it('counts what a workspace moves, per host, egress IP and user, in the API and /metrics', async () => {
    const before = await settled();
    const moved = await move();
    const after = await settled();
    agrees(after.received - before.received, moved.received, 'received');
    agrees(after.sent - before.sent, moved.sent, 'sent');

    const read = await totals();
    const byEgress = read.egress_ips[0];
    const byUser = read.users.find((u: { user_id: string }) => u.user_id === userId);
    assert.equal(read.egress_ips.length, 1);
    assert.equal(byEgress.received_bytes, after.received);
    assert.equal(byUser.sent_bytes, after.sent);
    const hours = await api(url, token, 'GET', `/v1/admin/egress-traffic/hours?host_id=${hostId}`);
    const summed = hours.body.hours.reduce(
      (sum: number, h: { received_bytes: number }) => sum + h.received_bytes,
      0,
    );
    assert.equal(summed, after.received);

    const metrics = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${token}` } });
    const text = await metrics.text();
    assert.match(
      text,
      new RegExp(
        `ccp_host_egress_bytes_total\\{host_id="${hostId}",direction="received"\\} ${after.received}\\b`,
      ),
    );
    assert.match(
      text,
      new RegExp(
        `ccp_egress_ip_bytes_total\\{egress_ip_id="${byEgress.egress_ip_id}",direction="sent"\\} ${after.sent}\\b`,
      ),
    );
  });

  it('bytes moved while the gateway is down are counted once it is back', async () => {
    const before = await settled();
    await gateway.kill('SIGKILL');
    const moved = await move();
    await gateway.start();
    const after = await settled();
    agrees(after.received - before.received, moved.received, 'received across the restart');
    agrees(after.sent - before.sent, moved.sent, 'sent across the restart');
  });

  it('after a switch to another egress IP (Trojan), its bytes are counted there and the old one keeps its own', async () => {
    const exit = lab.exits[1]!;
    const second = await api(url, token, 'POST', '/v1/admin/egress-ips', {
      label: 'lab trojan',
      ip_address: exit.address,
      proxy_config: exit.variants['trojan-tls'].proxyConfig,
    });
    assert.equal(second.status, 201, JSON.stringify(second.body));
    const host = (await api(url, token, 'GET', `/v1/admin/hosts/${hostId}`)).body;
    const first = host.bindings[0];
    assert.equal(
      (await api(url, token, 'POST', '/v1/admin/bindings', { host_id: hostId, egress_ip_id: second.body.id }))
        .status,
      201,
    );
    // The first binding goes: the standby carries the traffic now, switched while the host runs.
    assert.equal((await api(url, token, 'DELETE', `/v1/admin/bindings/${first.id}`)).status, 204);
    await eventually(
      'the switch to the second egress IP',
      async () => {
        const echo = await exec('docker', [
          'exec',
          `ccp-ws-${hostId}`,
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
    const egressOf = async (id: string) => {
      const row = (await totals()).egress_ips.find((r: { egress_ip_id: string }) => r.egress_ip_id === id);
      return { sent: row?.sent_bytes ?? 0, received: row?.received_bytes ?? 0 };
    };
    await settled();
    const [firstBefore, secondBefore] = [await egressOf(first.egress_ip_id), await egressOf(second.body.id)];
    const moved = await move();
    await settled();
    const [firstAfter, secondAfter] = [await egressOf(first.egress_ip_id), await egressOf(second.body.id)];
    agrees(secondAfter.received - secondBefore.received, moved.received, 'received through Trojan');
    agrees(secondAfter.sent - secondBefore.sent, moved.sent, 'sent through Trojan');
    assert.deepEqual(firstAfter, firstBefore, 'the old egress IP counted nothing more');
  });

  it('a user sees their own figures', async () => {
    const login = await api(url, null, 'POST', '/v1/auth/login', {
      username: (await api(url, token, 'GET', `/v1/admin/users/${userId}`)).body.username,
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
