import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import Docker from 'dockerode';
import { ensureLab, type LabDescription } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { HOST_LABEL } from '../../src/runtime/container-specs.js';
import {
  api,
  eventually,
  REPO_ROOT,
  startLabGatewayProcessWithHost,
  waitForTask,
} from '../helpers/gateway-process.js';
import { buildTestImages } from '../helpers/lab-egress.js';
import { removeHostResources } from '../helpers/lab-gateway.js';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const exec = promisify(execFile);
const root = REPO_ROOT;
const docker = new Docker({ socketPath: '/var/run/docker.sock' });

async function hostContainers(hostId: string) {
  return docker.listContainers({ all: true, filters: { label: [`${HOST_LABEL}=${hostId}`] } });
}

describe('faults the gateway survives', { skip: needs('lab', 'docker'), timeout: 900_000 }, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-faults-'));
  const hostIds: string[] = [];
  let lab: LabDescription;

  before(async () => {
    [, lab] = await Promise.all([buildTestImages(), ensureLab()]);
  });
  after(async () => {
    await removeHostResources(hostIds);
    rmSync(work, { recursive: true, force: true });
  });

  const gatewayWithHost = async (name: string) => {
    const started = await startLabGatewayProcessWithHost(lab, work, name);
    hostIds.push(started.hostId);
    return started;
  };

  it('kill -9 during a start: the task fails as interrupted, the host is reconciled, no duplicates', async () => {
    const { gateway, url, token, hostId } = await gatewayWithHost('kill');
    try {
      const start = await api(url, token, 'POST', `/v1/admin/hosts/${hostId}/start`);
      assert.equal(start.status, 202);
      // Killed once containers are being made: the worst moment for leftovers.
      await eventually(
        'the start to reach the containers',
        async () =>
          (await api(url, token, 'GET', `/v1/admin/tasks/${start.body.task_id}`)).body.progress >= 25,
        120_000,
      );
      await gateway.kill('SIGKILL');

      await gateway.start();
      const task = (await api(url, token, 'GET', `/v1/admin/tasks/${start.body.task_id}`)).body;
      assert.equal(task.status, 'failed');
      assert.equal(task.error.code, 'interrupted');
      // Reconciling runs once the gateway listens again.
      const reconciled = await eventually('the host to be reconciled', async () => {
        const events = await api(
          url,
          token,
          'GET',
          `/v1/admin/events?type=host.reconciled&host_id=${hostId}`,
        );
        return events.body.total === 1 ? events.body.events[0] : undefined;
      });
      assert.match(reconciled.message, /was starting/);
      const host = (await api(url, token, 'GET', `/v1/admin/hosts/${hostId}`)).body;
      assert.ok(['failed', 'stopped'].includes(host.status), host.status);

      const again = await api(url, token, 'POST', `/v1/admin/hosts/${hostId}/start`);
      const restarted = await waitForTask(url, token, again.body.task_id);
      assert.equal(restarted.status, 'succeeded', JSON.stringify(restarted.error));
      const containers = await hostContainers(hostId);
      assert.equal(containers.length, 2, containers.map((c) => c.Names.join()).join(' '));
      assert.ok(containers.every((c) => c.State === 'running'));
    } finally {
      await gateway.kill('SIGTERM');
    }
  });

  it('v2ray killed in the egress gateway: restarted by its supervisor, logged, the host keeps working', async () => {
    const { gateway, url, token, hostId } = await gatewayWithHost('v2ray');
    try {
      const start = await api(url, token, 'POST', `/v1/admin/hosts/${hostId}/start`);
      assert.equal((await waitForTask(url, token, start.body.task_id)).status, 'succeeded');
      const [egress] = (await hostContainers(hostId)).filter((c) =>
        c.Names.some((n) => n.includes('ccp-egress-')),
      );
      assert.ok(egress);
      const pidOf = async () =>
        (await exec('docker', ['exec', egress.Id, 'cat', '/run/ccp-egress/v2ray.pid'])).stdout.trim();
      const before = await pidOf();
      await exec('docker', ['exec', egress.Id, 'kill', '-KILL', before]);
      await eventually('v2ray to run again', async () => {
        const now = await pidOf();
        return now !== before && now !== '';
      });
      const logged = await eventually('the restart to be logged', async () => {
        const events = await api(
          url,
          token,
          'GET',
          `/v1/admin/events?type=host.egress.restarted&host_id=${hostId}`,
        );
        return events.body.total >= 1 ? events.body.events[0] : undefined;
      });
      assert.equal(logged.level, 'warn');
      assert.equal((await api(url, token, 'GET', `/v1/admin/hosts/${hostId}`)).body.status, 'running');
    } finally {
      await gateway.kill('SIGTERM');
    }
  });

  it('dockerd restarted under a running host: it comes back running, or is reported, never silently wrong', {
    skip: needs('docker') || (!existsSync('/var/run/docker.pid') && 'dockerd is not running here'),
  }, async () => {
    const { gateway, url, token, hostId } = await gatewayWithHost('dockerd');
    try {
      const start = await api(url, token, 'POST', `/v1/admin/hosts/${hostId}/start`);
      assert.equal((await waitForTask(url, token, start.body.task_id)).status, 'succeeded');

      const daemonPid = Number(readFileSync('/var/run/docker.pid', 'utf8'));
      process.kill(daemonPid, 'SIGTERM');
      await eventually('dockerd to stop', async () => {
        try {
          process.kill(daemonPid, 0);
          return false;
        } catch {
          return true;
        }
      });
      const down = await api(url, null, 'GET', '/healthz');
      assert.equal(down.status, 503);
      assert.notEqual(down.body.checks.agent, 'ok');
      await exec('bash', [path.join(root, 'scripts/docker.sh'), 'ensure']);

      // Reported state and reality agree: running means a working workspace; anything else is said.
      const settled = await eventually(
        'the host to settle',
        async () => {
          const host = (await api(url, token, 'GET', `/v1/admin/hosts/${hostId}`)).body;
          if (host.status !== 'running') return host.status === 'failed' ? host : undefined;
          const containers = await hostContainers(hostId);
          const ready = containers.length === 2 && containers.every((c) => c.State === 'running');
          if (!ready) return undefined;
          const probe = await exec('docker', [
            'exec',
            containers.find((c) => c.Names.some((n) => n.includes('ccp-ws-')))!.Id,
            'bash',
            '-c',
            `exec 3<>/dev/tcp/${new URL(lab.internet.httpUrl).hostname}/80 2>/dev/null && echo reached || echo blocked`,
          ]).catch(() => ({ stdout: 'exec failed' }));
          return probe.stdout.includes('reached') ? host : undefined;
        },
        120_000,
      );
      assert.ok(['running', 'failed'].includes(settled.status));
      if (settled.status === 'failed') assert.ok(settled.last_error, 'a failed host says why');
      assert.equal((await api(url, null, 'GET', '/healthz')).status, 200);
    } finally {
      await gateway.kill('SIGTERM');
    }
  });
});

describe('a full disk in DATA_DIR', { skip: needs('root') }, () => {
  const mountpoint = mkdtempSync(path.join(tmpdir(), 'ccp-full-'));
  let t: TestGateway;
  before(async () => {
    await exec('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'ccp-test-full', mountpoint]);
    t = await startTestGateway('sqlite', {
      DATA_DIR: mountpoint,
      DATABASE_URL: `sqlite:${path.join(mountpoint, 'gateway.db')}`,
    });
  });
  after(async () => {
    await t?.close().catch(() => {});
    await exec('umount', [mountpoint]).catch(() => {});
    rmSync(mountpoint, { recursive: true, force: true });
  });

  it('answers writes with a clear 507, keeps serving reads, and loses nothing once space is back', async () => {
    const created: string[] = [];
    for (let i = 0; i < 3; i++) created.push((await t.createUser(`full${i}`)).id);
    // Leave almost nothing: the next writes hit the end of the file system.
    await exec('sh', ['-c', `dd if=/dev/zero of=${mountpoint}/filler bs=64k 2>/dev/null; true`]);
    let refused: { status: number; body: any } | null = null;
    for (let i = 0; i < 200 && !refused; i++) {
      const response = await t.request('POST', '/v1/admin/users', {
        body: { username: `fill${i}${'x'.repeat(40)}`, password: 'a-long-enough-password' },
      });
      if (response.status === 201) created.push(response.body.id);
      else refused = response;
    }
    assert.ok(refused, 'a write was refused');
    assert.equal(refused.status, 507, JSON.stringify(refused.body));
    assert.equal(refused.body.code, 'storage_full');
    assert.match(refused.body.error, /storage is full/);
    const listed = await t.request('GET', '/v1/admin/users');
    assert.equal(listed.status, 200);

    rmSync(path.join(mountpoint, 'filler'));
    const later = await t.request('POST', '/v1/admin/users', {
      body: { username: 'after-space', password: 'a-long-enough-password' },
    });
    assert.equal(later.status, 201, JSON.stringify(later.body));
    const ids = new Set(
      (await t.request('GET', '/v1/admin/users')).body.users.map((u: { id: string }) => u.id),
    );
    for (const id of created) assert.ok(ids.has(id), `user ${id} is still there`);
    const check = new Database(path.join(mountpoint, 'gateway.db'), { readonly: true });
    try {
      assert.equal(check.pragma('integrity_check', { simple: true }), 'ok');
    } finally {
      check.close();
    }
  });
});

describe('PostgreSQL restarted under the gateway', {
  skip: needs('root', 'postgres') || (!process.env.TEST_POSTGRES_URL && 'TEST_POSTGRES_URL is not set'),
}, () => {
  let t: TestGateway;
  const cluster = async (action: 'stop' | 'start') => {
    const { stdout } = await exec('pg_lsclusters', ['-h']);
    const [version, name] = stdout.trim().split('\n')[0]!.split(/\s+/);
    await exec('pg_ctlcluster', [version!, name!, action]);
  };
  before(async () => {
    t = await startTestGateway('postgres', { DOCKER_SOCKET: '/var/run/docker.sock' });
    await t.listen();
  });
  after(async () => {
    await cluster('start').catch(() => {});
    await t?.close().catch(() => {});
  });

  it('fails requests fast with 503 during the outage, reconnects after, and loses nothing', async () => {
    const before = await t.createUser('pgfault1');
    await cluster('stop');
    try {
      const began = Date.now();
      const during = await t.request('GET', '/v1/admin/users');
      assert.equal(during.status, 503, JSON.stringify(during.body));
      assert.equal(during.body.code, 'database_unavailable');
      assert.ok(Date.now() - began < 6_000, `answered in ${Date.now() - began} ms`);
      const health = await t.request('GET', '/healthz', { token: null });
      assert.equal(health.status, 503);
      assert.notEqual(health.body.checks.database, 'ok');
      const write = await t.request('POST', '/v1/admin/users', {
        body: { username: 'pgfault-lost', password: 'a-long-enough-password' },
      });
      assert.equal(write.status, 503);
    } finally {
      await cluster('start');
    }
    const users = await eventually('the gateway to reconnect', async () => {
      const response = await t.request('GET', '/v1/admin/users');
      return response.status === 200 ? response.body.users : undefined;
    });
    assert.ok(users.some((u: { id: string }) => u.id === before.id));
    assert.ok(!users.some((u: { username: string }) => u.username === 'pgfault-lost'));
    assert.equal((await t.request('GET', '/healthz', { token: null })).status, 200);
    assert.ok(await t.createUser('pgfault2'));
  });
});
