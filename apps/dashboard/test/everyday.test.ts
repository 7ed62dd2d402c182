import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Node } from '@ccp/api';
import { type Browser, chromium, type Page } from 'playwright-core';
import { needs } from '../../../test/support/needs.js';
import { freePort } from '../../gateway/test/helpers/lab-gateway.js';
import { MemoryRuntime } from '../../gateway/test/helpers/memory-runtime.js';
import { freePortRange } from '../../gateway/test/helpers/shared-ports.js';
import {
  ADMIN_PASSWORD,
  startTestGateway,
  type TestGateway,
} from '../../gateway/test/helpers/test-gateway.js';
import { bytes } from '../src/format.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const DASHBOARD = fileURLToPath(new URL('..', import.meta.url));
const VITE = fileURLToPath(new URL('../../../node_modules/.bin/vite', import.meta.url));
const SHOTS = fileURLToPath(new URL('../../../test-output/dashboard/', import.meta.url));
const skip = needs('browser');
/** Nodes heartbeat every second and are silent after 3: a stopped gateway's hosts are marked within seconds. */
const NODE_TIMING = { NODE_HEARTBEAT_SECONDS: '1', NODE_DEAD_SECONDS: '3' };

/** The dev server, forwarding the API to the gateway: it builds nothing into dist/, which other tests serve. */
async function startVite(apiUrl: string): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(VITE, ['--port', String(port), '--strictPort', '--host', '127.0.0.1'], {
    cwd: DASHBOARD,
    // Plain output (CI=true turns colours on), so the address line can be read.
    env: { ...process.env, DASHBOARD_DEV_API: apiUrl, NO_COLOR: '1', FORCE_COLOR: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      // A dev server left running would keep the test process, and so the whole run, alive.
      child.kill();
      reject(new Error(`vite did not start:\n${output}`));
    }, 60_000);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI colour sequences
      if (output.replace(/\u001b\[[0-9;]*m/g, '').includes(`:${port}`)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on('data', read);
    child.stderr?.on('data', read);
    child.once('exit', (code) => reject(new Error(`vite exited with ${code}:\n${output}`)));
  });
  return { url: `http://127.0.0.1:${port}`, child };
}

/** Waits until `check` holds. */
async function until(what: string, check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function signIn(page: Page, username: string, password: string): Promise<void> {
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/**
 * What a user and an admin meet every day, in Chromium against a gateway on the memory runtime (no Docker): the
 * portal's Start and Stop, a failed host's reason and next step, short IDs on the task list, the task a host's
 * page chooses to show, and the nodes (a second gateway on the same database) with a host on one that goes silent.
 */
describe('everyday use of the dashboard in Chromium', { skip, timeout: 300_000 }, () => {
  const runtime = new MemoryRuntime();
  /** When a tmux pane of a host last printed, as the activity probe reports it. */
  const terminalOutputAt = new Map<string, number>();
  let t: TestGateway;
  let vite: { url: string; child: ChildProcess };
  let browser: Browser;
  let user: { id: string; password: string };
  let egressIpId: string;
  /** The second gateway of the nodes test, sharing the first one's database. */
  let far: TestGateway | undefined;
  const startFar = async () => {
    far = await startTestGateway('sqlite', {
      ...NODE_TIMING,
      NODE_NAME: 'far',
      DATABASE_URL: `sqlite:${path.join(t.dataDir, 'gateway.db')}`,
    });
    await far.listen();
  };

  const createHost = async (bound: boolean) => {
    const body = { user_id: user.id, ...(bound ? { egress_ip_id: egressIpId } : {}) };
    const created = await t.request('POST', '/v1/admin/hosts', { body });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    return created.body as { id: string; short_id: string };
  };
  const hostStatus = async (id: string) => (await t.request('GET', `/v1/admin/hosts/${id}`)).body.status;
  const pageAs = async (username: string, password: string, path: string) => {
    const context = await browser.newContext({ baseURL: vite.url, viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await page.goto(path);
    await signIn(page, username, password);
    await page.waitForURL(`**${path}`);
    return page;
  };
  const shot = (page: Page, name: string) =>
    page.screenshot({ path: `${SHOTS}everyday-${name}.png`, fullPage: true });

  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    // Workspaces that show no activity but the terminal output a test sets: the lifecycle policy's rounds, run by
    // hand, decide by the policy alone. A log-only egress policy, whose decisions the test hands the memory runtime.
    const policy = { mode: 'log-only', default_action: 'allow', rules: [] };
    const sharePort = await freePortRange(1);
    const env = {
      ...NODE_TIMING,
      EGRESS_POLICY: JSON.stringify(policy),
      EGRESS_POLICY_LOG_SECONDS: '0',
      // One port to share a workspace's app on (the share-with-me test).
      SHARE_PORTS: `${sharePort}-${sharePort}`,
    };
    t = await startTestGateway('sqlite', env, runtime, {
      activityProbe: {
        sample: async () => ({ cpuSeconds: 0, networkBytes: 0, pid: 1 }),
        terminalOutputAt: async (hostId) => terminalOutputAt.get(hostId) ?? null,
        tellTerminals: async () => {},
      },
    });
    await t.listen();
    vite = await startVite(t.url);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    const created = await t.request('POST', '/v1/admin/users', {
      body: { username: 'dana', password: 'dana-password' },
    });
    user = { id: created.body.id, password: 'dana-password' };
    const egress = await t.request('POST', '/v1/admin/egress-ips', {
      body: {
        label: 'exit one',
        ip_address: '198.51.100.31',
        proxy_config: { type: 'socks', server: '198.51.100.31', server_port: 1080 },
      },
    });
    egressIpId = egress.body.id;
  });

  after(async () => {
    await browser?.close();
    vite?.child.kill();
    await far?.close();
    await t?.close();
  });

  it('lets a user start and stop their own host from its page, and greys out what cannot be pressed', async () => {
    const host = await createHost(true);
    const page = await pageAs('dana', user.password, `/portal/hosts/${host.id}`);
    const start = page.getByRole('button', { name: 'Start', exact: true });
    const stop = page.getByRole('button', { name: 'Stop', exact: true });
    assert.equal(await stop.isDisabled(), true, 'a host never started cannot be stopped');
    const background = (locator: typeof start) =>
      locator.evaluate((button) => getComputedStyle(button).backgroundColor);
    const primary = await background(start);
    // The desktop comes up a little after its host, as in a real workspace.
    runtime.desktops.set(host.id, 'starting');
    const desktopBadge = page.getByTestId('desktop').locator('.badge');
    await desktopBadge.filter({ hasText: /^host stopped$/ }).waitFor();
    await start.click();
    const progress = page.getByTestId('task-progress');
    await progress.and(page.locator('[data-status="succeeded"]')).waitFor();
    await page.getByRole('heading', { name: /running/ }).waitFor();
    assert.equal(await hostStatus(host.id), 'running');
    // The desktop's badge follows the host and then the desktop without a reload (it was once seen to keep
    // "host stopped" after a start).
    await desktopBadge.filter({ hasText: /^starting$/ }).waitFor({ timeout: 5000 });
    runtime.desktops.set(host.id, 'running');
    await desktopBadge.filter({ hasText: /^running$/ }).waitFor({ timeout: 5000 });
    const openDesktop = page.getByTestId('desktop').getByRole('button', { name: 'Open desktop' });
    assert.equal(await openDesktop.isDisabled(), false);
    assert.equal(await start.isDisabled(), true);
    assert.notEqual(await background(start), primary, 'a disabled Start does not keep the primary colour');
    assert.equal(
      await start.evaluate((button) => getComputedStyle(button).cursor),
      'not-allowed',
      'and says it cannot be pressed',
    );
    // One password story: SSH takes the password the user signed in with (ssh-proxy.test.ts logs in with it).
    assert.match(
      (await page.getByTestId('ssh-password-hint').textContent()) ?? '',
      /SSH takes the account's own password, the one that signs in here/,
    );
    // Getting ccp: the one line installs it from the gateway that serves the page, and it is served there.
    const install = await page.getByTestId('ccp-install').textContent();
    assert.equal(install, `curl -fsSL ${vite.url}/v1/cli/install | sh`);
    assert.equal((await fetch(`${vite.url}/v1/cli/install`)).status, 200);
    assert.equal(
      await page.getByTestId('ccp-init').textContent(),
      `ccp init --gateway ${vite.url} --short-id ${host.short_id} && ccp`,
    );
    // Its checksum, from the signed-in API, is the one of the bytes served; on the loopback nothing to warn about.
    const served = Buffer.from(await (await fetch(`${vite.url}/v1/cli/ccp.mjs`)).arrayBuffer());
    assert.equal(
      await page.getByTestId('ccp-checksum').textContent(),
      createHash('sha256').update(served).digest('hex'),
    );
    assert.equal(await page.getByTestId('ccp-install-warning').count(), 0);
    assert.equal(await page.getByTestId('page-transport-warning').count(), 0);
    assert.equal(await page.getByTestId('access-command-warning').count(), 0);
    await shot(page, 'portal-host-running');
    await stop.click();
    await page.getByRole('heading', { name: /stopped/ }).waitFor();
    assert.equal(await hostStatus(host.id), 'stopped');
    await page.context().close();
  });

  it('warns of a coming policy stop with a banner, and Extend moves the stop', async () => {
    const host = await createHost(true);
    assert.equal((await t.request('POST', `/v1/admin/hosts/${host.id}/start`)).status, 202);
    await t.gateway.tasks.idle();
    const page = await pageAs('dana', user.password, `/portal/hosts/${host.id}`);
    await page.getByRole('heading', { name: /running/ }).waitFor();
    assert.equal(await page.getByTestId('stop-warning').count(), 0);
    // Its lifetime ends within the warning time (10 minutes): the next round warns.
    const startedAt = Date.parse((await t.request('GET', `/v1/admin/hosts/${host.id}`)).body.started_at);
    const lifetime = Math.ceil((Date.now() - startedAt) / 1000) + 300;
    await t.request('PUT', `/v1/admin/hosts/${host.id}/lifecycle-policy`, {
      body: { idle_timeout_seconds: null, max_lifetime_seconds: lifetime, schedule: null },
    });
    await t.gateway.lifecycleScheduler.round();
    const banner = page.getByTestId('stop-warning');
    await banner.waitFor({ timeout: 5000 });
    assert.match((await banner.textContent()) ?? '', /This host stops at .+ \(its maximum lifetime\)/);
    await shot(page, 'portal-host-stop-warning');
    const planned = Date.parse(
      (await t.request('GET', `/v1/admin/hosts/${host.id}`)).body.lifecycle.planned_stop.at,
    );
    await page.getByTestId('host-lifecycle').getByRole('button', { name: 'Extend' }).click();
    await banner.waitFor({ state: 'detached', timeout: 5000 });
    const moved = (await t.request('GET', `/v1/admin/hosts/${host.id}`)).body.lifecycle.planned_stop;
    assert.equal(Date.parse(moved.at), planned + 3_600_000, 'HOST_EXTEND_SECONDS past the planned stop');
    assert.match(
      (await page.getByTestId('host-lifecycle').textContent()) ?? '',
      /stops at .+ \(its maximum lifetime\)/,
    );
    await page.context().close();
  });

  it("sets a host's egress budget on its page, and shows the banner of a reached and throttled budget until it is raised", async () => {
    const host = await createHost(true);
    assert.equal((await t.request('POST', `/v1/admin/hosts/${host.id}/start`)).status, 202);
    await t.gateway.tasks.idle();
    const page = await pageAs('admin', ADMIN_PASSWORD, `/admin/hosts/${host.id}`);
    const panel = page.getByTestId('egress-budget-form');
    await panel.getByLabel('Limit per month, MiB').fill('1');
    await panel.getByLabel('At the limit').selectOption('throttle');
    await panel.getByLabel('Throttle to, KiB/s').fill('64');
    await panel.getByRole('button', { name: 'Save budget' }).click();
    const use = page.getByTestId('egress-budget-use');
    await use
      .filter({ hasText: /0 B of 1\.0 MiB used in \d{4}-\d\d \(under; at the limit: throttle\)/ })
      .waitFor();
    // The meter finds 1.5 MiB moved: the budget is reached and the host throttled, live on the page.
    runtime.egressTraffic.set(host.id, [{ egressIpId: null, sent: 0, received: 1536 * 1024 }]);
    await t.gateway.egressMeter.sample();
    await t.gateway.egressBudgetRound.round();
    const notice = page.getByTestId('egress-notice');
    await notice.waitFor({ timeout: 5000 });
    assert.match((await notice.textContent()) ?? '', /Egress budget reached: 1\.5 MiB of 1\.0 MiB/);
    assert.match((await notice.textContent()) ?? '', /throttled to 64\.0 KiB\/s each way/);
    assert.equal(runtime.throttles.get(host.id), 64 * 1024);
    await page.reload();
    await notice.waitFor();
    await shot(page, 'admin-host-egress-budget-throttled');
    await panel.getByLabel('Limit per month, MiB').fill('10');
    await panel.getByRole('button', { name: 'Save budget' }).click();
    await page.getByTestId('egress-throttled').waitFor({ state: 'detached', timeout: 5000 });
    assert.equal(runtime.throttles.get(host.id), undefined, 'a raised budget lifts the throttle');
    await use.filter({ hasText: /1\.5 MiB of 10\.0 MiB used/ }).waitFor();
    await notice.waitFor({ state: 'detached', timeout: 5000 });
    await page.context().close();
  });

  it("shows a user's failed host with its reason and the next step", async () => {
    const host = await createHost(true);
    const page = await pageAs('dana', user.password, `/portal/hosts/${host.id}`);
    const start = page.getByRole('button', { name: 'Start', exact: true });
    await start.waitFor();
    runtime.failNextStart = 'image_missing';
    await start.click();
    const failure = page.getByTestId('host-failure');
    await failure.waitFor();
    assert.match((await failure.textContent()) ?? '', /image_missing: simulated image_missing/);
    assert.match((await failure.textContent()) ?? '', /Press Start to try again/);
    await shot(page, 'portal-host-failed');
    await page.goto('/portal');
    const onList = page.getByTestId('host-failure').filter({ hasText: 'image_missing' });
    await onList.getByRole('link', { name: 'Open the host' }).waitFor();

    // Without an egress IP the owner cannot fix it: the next step is the administrator.
    const [binding] = (await t.request('GET', `/v1/admin/hosts/${host.id}`)).body.bindings;
    assert.equal((await t.request('DELETE', `/v1/admin/bindings/${binding.id}`)).status, 204);
    await page.goto(`/portal/hosts/${host.id}`);
    await page
      .getByTestId('host-failure')
      .getByText(/Ask your administrator to bind one/)
      .waitFor();
    await page.context().close();
  });

  /** A running host whose newest task is a bootstrap that found it running and changed nothing. */
  const startedThenBootstrapped = async () => {
    const host = await createHost(true);
    assert.equal((await t.request('POST', `/v1/admin/hosts/${host.id}/start`)).status, 202);
    await t.gateway.tasks.idle();
    const bootstrap = await t.request('POST', '/v1/bootstrap/sessions', {
      token: null,
      body: { username: 'dana', password: user.password, host: host.short_id },
    });
    assert.equal(bootstrap.status, 202, JSON.stringify(bootstrap.body));
    await t.gateway.tasks.idle();
    return host;
  };

  it("shows on a host's page its newest task that changed something", async () => {
    const host = await startedThenBootstrapped();
    const page = await pageAs('admin', ADMIN_PASSWORD, `/admin/hosts/${host.id}`);
    const progress = page.getByTestId('task-progress');
    await progress.waitFor();
    assert.match(
      (await progress.textContent()) ?? '',
      /^start · done/,
      'the start, not the bootstrap that found it running',
    );
    await shot(page, 'admin-host-lifecycle');
    await page.context().close();
  });

  it("shows the images' state on the overview, follows a change live, and builds a missing one with progress", async () => {
    const page = await pageAs('admin', ADMIN_PASSWORD, '/admin');
    const images = page.getByTestId('images');
    await images.getByText('built', { exact: true }).waitFor();
    assert.match((await images.textContent()) ?? '', /workspace.*Built .* 800 MB\./);
    const buildMissing = page.getByRole('button', { name: 'Build missing images' });
    assert.equal(await buildMissing.isDisabled(), true, 'nothing is missing');
    await shot(page, 'admin-overview-images');

    runtime.imagePresent = false;
    let finish!: () => void;
    runtime.imageBuild = new Promise((resolve) => {
      finish = resolve;
    });
    try {
      // Any check announces the images on the image-status topic (the gateway also checks every 5 minutes).
      await t.request('GET', '/v1/admin/images');
      await images.getByText('missing', { exact: true }).waitFor();
      assert.match((await images.textContent()) ?? '', /Not built: hosts cannot start from it/);
      await buildMissing.click();
      const progress = page.getByTestId('task-progress');
      await progress.getByText('docker build ccp-workspace:memory').waitFor();
      assert.match((await progress.textContent()) ?? '', /^image-build/);
      await shot(page, 'admin-overview-image-build');
      finish();
      await progress.and(page.locator('[data-status="succeeded"]')).waitFor();
      await images.getByText('built', { exact: true }).waitFor();
      assert.ok(runtime.calls.includes('buildImages missing'));
    } finally {
      finish();
      runtime.imagePresent = true;
    }
    await page.context().close();
  });

  it('names hosts by short ID on the task list', async () => {
    const host = await startedThenBootstrapped();
    const page = await pageAs('admin', ADMIN_PASSWORD, `/admin/tasks?host_id=${host.id}`);
    const links = page.getByRole('link', { name: host.short_id, exact: true });
    await links.first().waitFor();
    assert.equal(await links.count(), 2, 'the start and the bootstrap, each naming the host by short ID');
    assert.equal(await page.getByText(host.id.slice(0, 8)).count(), 0, 'no UUID prefix');
    await page.getByText(`Host ${host.short_id}`).waitFor();
    await shot(page, 'admin-tasks');
    await page.context().close();
  });

  it("sets a user's quota on the user's page, shows its use to admins and the user, and resizes a host", async () => {
    const created = await t.request('POST', '/v1/admin/users', {
      body: { username: 'quincy', password: 'quincy-password' },
    });
    const quincy = created.body.id as string;
    const host = (
      await t.request('POST', '/v1/admin/hosts', { body: { user_id: quincy, egress_ip_id: egressIpId } })
    ).body as { id: string };
    const admin = await pageAs('admin', ADMIN_PASSWORD, `/admin/users/${quincy}`);
    await admin.getByLabel('Hosts', { exact: true }).fill('1');
    await admin.getByRole('button', { name: 'Save resources' }).click();
    await admin.getByTestId('quota-hosts').filter({ hasText: '1 of 1' }).waitFor();
    const refused = await t.request('POST', '/v1/admin/hosts', { body: { user_id: quincy } });
    assert.equal(refused.body.code, 'quota_exceeded');
    await admin.goto('/admin/quotas');
    await admin
      .getByTestId('quotas')
      .getByRole('row', { name: /quincy/ })
      .filter({ hasText: '1 of 1' })
      .waitFor();
    await admin.goto(`/admin/hosts/${host.id}`);
    await admin.getByLabel('Memory, MiB').fill('768');
    await admin.getByRole('button', { name: 'Resize' }).click();
    await admin.getByTestId('host-resources').filter({ hasText: '768 MiB memory' }).waitFor();
    await shot(admin, 'quotas-host-resized');
    const own = await pageAs('quincy', 'quincy-password', '/portal/account');
    await own.getByTestId('quota-hosts').filter({ hasText: '1 of 1' }).waitFor();
    await own.context().close();
    await admin.context().close();
  });

  it("shows a running host's limits, last activity and time left, and a user's quota use, to admins and the user", async () => {
    const created = await t.request('POST', '/v1/admin/users', {
      body: { username: 'lena', password: 'lena-password' },
    });
    const lena = created.body.id as string;
    const quotas = { hosts: 3, running_hosts: 2, cpus: 4, memory_mb: 8192, home_mb: 30720 };
    await t.request('PUT', `/v1/admin/users/${lena}/resources`, { body: { quotas } });
    const newHost = async (resources: Record<string, number>) =>
      (
        await t.request('POST', '/v1/admin/hosts', {
          body: { user_id: lena, egress_ip_id: egressIpId, resources },
        })
      ).body as { id: string; short_id: string };
    const host = await newHost({ cpus: 2, memory_mb: 3072, pids: 800, home_mb: 12288 });
    await newHost({ home_mb: 4096 });
    assert.equal((await t.request('POST', `/v1/admin/hosts/${host.id}/start`)).status, 202);
    await t.gateway.tasks.idle();
    // Its agent prints now (after its start); it stops after half an hour without activity.
    terminalOutputAt.set(host.id, Date.now());
    await t.request('PUT', `/v1/admin/hosts/${host.id}/lifecycle-policy`, {
      body: { idle_timeout_seconds: 1800, max_lifetime_seconds: null, schedule: null },
    });
    await t.gateway.lifecycleScheduler.round();
    const lifecycle = (await t.request('GET', `/v1/admin/hosts/${host.id}`)).body.lifecycle;
    assert.equal(lifecycle.last_activity_signal, 'terminal');
    assert.equal(lifecycle.planned_stop.reason, 'idle');

    const limits = /2 CPUs · 3072 MiB memory · 800 processes · 12288 MiB home/;
    const activity = /Last active .+ \(a terminal printed\)/;
    const timeLeft = /stops at .+, in (28|29) min \(idle/;
    const admin = await pageAs('admin', ADMIN_PASSWORD, `/admin/hosts/${host.id}`);
    await admin.getByTestId('host-lifecycle').filter({ hasText: timeLeft }).waitFor();
    assert.match((await admin.getByTestId('host-resources').textContent()) ?? '', limits);
    assert.match((await admin.getByTestId('host-lifecycle').textContent()) ?? '', activity);
    // No schedule: its days are greyed until a time zone makes one.
    const monday = admin.getByTestId('schedule-days').getByRole('checkbox', { name: 'mon' });
    assert.equal(await monday.isDisabled(), true, 'no schedule, no days to choose');
    await shot(admin, 'limits-admin-host');
    await admin.getByLabel('Time zone').fill('Europe/Berlin');
    assert.equal(await monday.isDisabled(), false, 'a time zone makes a schedule');
    assert.equal(await monday.isChecked(), true, 'Monday to Friday to begin with');
    await admin.goto(`/admin/users/${lena}`);
    await admin.getByTestId('quota-hosts').filter({ hasText: '2 of 3' }).waitFor();
    assert.equal(await admin.getByTestId('quota-running_hosts').textContent(), '1 of 2');
    assert.equal(await admin.getByTestId('quota-cpus').textContent(), '2 of 4');
    assert.equal(await admin.getByTestId('quota-memory_mb').textContent(), '3072 of 8192 MiB');
    assert.equal(await admin.getByTestId('quota-home_mb').textContent(), '16384 of 30720 MiB');
    await shot(admin, 'limits-admin-user-quotas');
    await admin.goto('/admin/quotas');
    await admin.getByTestId('quotas').getByRole('row', { name: /lena/ }).waitFor();
    await shot(admin, 'limits-admin-quotas');
    await admin.context().close();

    const own = await pageAs('lena', 'lena-password', `/portal/hosts/${host.id}`);
    await own.getByTestId('host-lifecycle').filter({ hasText: timeLeft }).waitFor();
    assert.match((await own.getByTestId('host-resources').textContent()) ?? '', limits);
    assert.match((await own.getByTestId('host-lifecycle').textContent()) ?? '', activity);
    await shot(own, 'limits-portal-host');
    await own.getByRole('link', { name: 'Account' }).click();
    await own.getByTestId('quota-memory_mb').filter({ hasText: '3072 of 8192 MiB' }).waitFor();
    await shot(own, 'limits-portal-account');
    await own.context().close();
  });

  it("sets a user's lifecycle defaults and a host's own policy on their pages, refusing a bad time zone", async () => {
    const created = await t.request('POST', '/v1/admin/users', {
      body: { username: 'petra', password: 'petra-password' },
    });
    const petra = created.body.id as string;
    const host = (
      await t.request('POST', '/v1/admin/hosts', { body: { user_id: petra, egress_ip_id: egressIpId } })
    ).body as { id: string };
    const admin = await pageAs('admin', ADMIN_PASSWORD, `/admin/users/${petra}`);
    await admin.getByLabel('Idle stop after, minutes').fill('45');
    await admin.getByRole('button', { name: 'Save policy' }).click();
    await until('the user default saved', async () => {
      const saved = await t.request('GET', `/v1/admin/users/${petra}/host-policy`);
      return saved.body.idle_timeout_seconds === 2700;
    });

    await admin.goto(`/admin/hosts/${host.id}`);
    await admin.getByTestId('effective-policy').filter({ hasText: 'idle stop: 45 min' }).waitFor();
    await admin.getByLabel('Maximum lifetime, hours').fill('8');
    await admin.getByLabel('Time zone').fill('Mars/Olympus');
    await admin.getByLabel('Start at (HH:MM)').fill('08:00');
    await admin.getByLabel('Stop at (HH:MM)').fill('20:00');
    await admin.getByRole('button', { name: 'Save policy' }).click();
    await admin
      .getByText('unknown time zone "Mars/Olympus"; use an IANA name such as Europe/Berlin or UTC')
      .waitFor();
    await admin.getByLabel('Idle stop after, minutes').fill('soon');
    await admin.getByRole('button', { name: 'Save policy' }).click();
    await admin.getByText('A number of minutes is needed').waitFor();
    await admin.getByLabel('Idle stop after, minutes').fill('');
    await admin.getByLabel('Time zone').fill('Europe/Berlin');
    await admin.getByRole('button', { name: 'Save policy' }).click();
    await admin
      .getByTestId('effective-policy')
      .filter({ hasText: 'lifetime: 8 h' })
      .filter({ hasText: 'mon, tue, wed, thu, fri 08:00–20:00 (Europe/Berlin)' })
      .waitFor();
    const policies = (await t.request('GET', `/v1/admin/hosts/${host.id}/lifecycle-policy`)).body;
    assert.deepEqual(policies.host, {
      idle_timeout_seconds: null,
      max_lifetime_seconds: 28_800,
      schedule: {
        time_zone: 'Europe/Berlin',
        days: ['mon', 'tue', 'wed', 'thu', 'fri'],
        start: '08:00',
        stop: '20:00',
      },
    });
    assert.equal(policies.effective.idle_timeout_seconds, 2700, "the owner's default, inherited");
    await shot(admin, 'host-lifecycle-policy');
    await admin.context().close();
  });

  it("shows a host's bytes per hour on its page, and per host, egress IP and user on the Traffic page", async () => {
    const host = await createHost(true);
    assert.equal((await t.request('POST', `/v1/admin/hosts/${host.id}/start`)).status, 202);
    await t.gateway.tasks.settled(host.id);
    // The egress IP and the user carry what other tests of this file moved too: this host's bytes add to those.
    const earlier = (await t.request('GET', '/v1/admin/egress-traffic')).body as {
      egress_ips: { egress_ip_id: string; sent_bytes: number; received_bytes: number }[];
      users: { user_id: string; sent_bytes: number; received_bytes: number }[];
    };
    const moved = { sent: 1.5 * 2 ** 20, received: 6 * 2 ** 20 };
    const row = (before?: { sent_bytes: number; received_bytes: number }) => {
      const [up, down] = [
        moved.sent + (before?.sent_bytes ?? 0),
        moved.received + (before?.received_bytes ?? 0),
      ];
      return [bytes(up), bytes(down), bytes(up + down)];
    };
    // What the host's egress gateway counted since: taken by the meter's next round.
    runtime.egressTraffic.set(host.id, [{ egressIpId: null, ...moved }]);
    await t.gateway.egressMeter.sample();

    const page = await pageAs('admin', ADMIN_PASSWORD, `/admin/hosts/${host.id}`);
    await page
      .getByTestId('host-traffic-total')
      .filter({ hasText: 'Last 24 hours: sent 1.5 MiB, received 6.0 MiB' })
      .waitFor();
    // This hour has bars (the others none), the received one the chart's full height; hovering says the figures.
    const hour = page.getByTestId('traffic-hour');
    assert.equal(await hour.count(), 1);
    assert.match((await hour.locator('title').textContent()) ?? '', /: sent 1\.5 MiB, received 6\.0 MiB$/);
    const height = async (bar: string) => (await hour.locator(bar).boundingBox())?.height ?? 0;
    const [sent, received] = [await height('.traffic-sent'), await height('.traffic-received')];
    const chart = (await page.getByTestId('host-traffic-chart').boundingBox())?.height ?? 0;
    assert.ok(received > chart * 0.7, `received bar ${received} px of ${chart}`);
    assert.ok(Math.abs(sent / received - 0.25) < 0.02, `sent bar ${sent} px, received ${received} px`);
    await page.mouse.move(0, 0);
    await shot(page, 'host-traffic');
    // The owner sees the same on their own host's page.
    const own = await pageAs('dana', user.password, `/portal/hosts/${host.id}`);
    await own
      .getByTestId('host-traffic-total')
      .filter({ hasText: 'Last 24 hours: sent 1.5 MiB, received 6.0 MiB' })
      .waitFor();
    await own.context().close();

    await page.getByRole('link', { name: 'Traffic', exact: true }).click();
    for (const [table, name, figures] of [
      ['traffic-hosts', host.short_id, ['1.5 MiB', '6.0 MiB', '7.5 MiB']],
      [
        'traffic-egress-ips',
        'exit one (198.51.100.31)',
        row(earlier.egress_ips.find((ip) => ip.egress_ip_id === egressIpId)),
      ],
      ['traffic-users', 'dana', row(earlier.users.find((one) => one.user_id === user.id))],
    ] as const) {
      const cells = page.getByTestId(table).locator('tr', { hasText: name }).locator('td');
      await cells.first().waitFor();
      assert.deepEqual(await cells.allTextContents(), [name, ...figures], table);
    }
    await shot(page, 'traffic');
    await page.context().close();
  });

  it("sets a host's egress policy on its page: its rules line by line, bad lines named, the policy in force shown", async () => {
    const created = await t.request('POST', '/v1/admin/users', {
      body: { username: 'egon', password: 'egon-password' },
    });
    const host = (
      await t.request('POST', '/v1/admin/hosts', {
        body: { user_id: created.body.id, egress_ip_id: egressIpId },
      })
    ).body as { id: string };
    const admin = await pageAs('admin', ADMIN_PASSWORD, `/admin/hosts/${host.id}`);
    const inForce = admin.getByTestId('effective-egress-policy');
    await inForce.filter({ hasText: "Follows the gateway's (EGRESS_POLICY): mode log-only" }).waitFor();
    await admin.getByLabel('Mode').selectOption('enforce');
    await admin.getByLabel('Default action').selectOption('deny');
    await admin
      .getByLabel('Rules')
      .fill('allow *.github.com\nallow 203.0.113.0/33 443\nlet everything through');
    await admin.getByRole('button', { name: 'Save egress policy' }).click();
    // Checked in the browser first, then by the gateway, each said of its line.
    await admin
      .getByText('line 3: write allow or deny, then a name, address or *, then a port if any')
      .waitFor();
    await admin.getByLabel('Rules').fill('allow *.github.com\nallow 203.0.113.0/33 443');
    await admin.getByRole('button', { name: 'Save egress policy' }).click();
    await admin.getByText('line 2: "203.0.113.0/33" is not an address or CIDR block').waitFor();
    await admin.getByLabel('Rules').fill('allow *.github.com\nallow 203.0.113.0/24 443');
    await admin.getByRole('button', { name: 'Save egress policy' }).click();
    await inForce
      .filter({ hasText: "Follows the host's own: mode enforce, default deny, 2 rules" })
      .filter({ hasText: '203.0.113.0/24' })
      .waitFor();
    const policies = (await t.request('GET', `/v1/admin/hosts/${host.id}/egress-policy`)).body;
    assert.deepEqual(policies.host, {
      mode: 'enforce',
      default_action: 'deny',
      rules: [
        { action: 'allow', domain: '*.github.com' },
        { action: 'allow', address: '203.0.113.0/24', port: '443' },
      ],
    });
    await shot(admin, 'host-egress-policy');
    await admin.getByRole('button', { name: "Follow the owner's default" }).click();
    await inForce.filter({ hasText: "Follows the gateway's (EGRESS_POLICY): mode log-only" }).waitFor();
    await admin.context().close();
  });

  it('lists the nodes on the overview, pins a host to one, and marks it while its node is silent', async () => {
    await startFar();
    // far says its images are built with its first heartbeat after its own check.
    const farNode = async () =>
      ((await t.request('GET', '/v1/admin/nodes')).body.nodes as Node[]).find((n) => n.name === 'far');
    await until('far to report its images', async () => (await farNode())?.images_ready === true);
    const page = await pageAs('admin', ADMIN_PASSWORD, '/admin');
    const nodes = page.getByTestId('nodes');
    const row = (name: string) =>
      nodes.getByRole('row').filter({ has: page.getByText(name, { exact: true }) });
    const state = (name: string, text: string) =>
      row(name)
        .locator('.badge')
        .first()
        .filter({ hasText: new RegExp(`^${text}$`) });
    await state('local', 'up').waitFor();
    await state('far', 'up').waitFor();
    const [name, up, hosts, running, memory, cpus, images, heartbeat] = await row('far')
      .getByRole('cell')
      .allTextContents();
    assert.deepEqual([name, up, hosts, running, images], ['far', 'up', '0 / 50', '0', 'built']);
    assert.match(memory!, /^\d+\.\d GiB$/);
    assert.match(cpus!, /^\d+$/);
    assert.match(heartbeat!, /\d:\d\d:\d\d/, 'to the second');
    await shot(page, 'admin-overview-nodes');

    await page.getByRole('link', { name: 'Hosts', exact: true }).click();
    const form = page.getByRole('form', { name: 'Create host' });
    const nodeField = form.getByLabel('Node');
    assert.equal(await nodeField.locator('option:checked').textContent(), 'Automatic');
    await form.getByLabel('User').selectOption({ label: 'dana' });
    await nodeField.selectOption('far');
    await form.getByRole('button', { name: 'Create host' }).click();
    const created = page.getByText(/^Host \w+ created for dana\.$/);
    const shortId = (await created.getByRole('link').textContent()) ?? '';
    await page.getByRole('button', { name: 'Done, hide it' }).click();
    const hostRow = page
      .getByRole('row')
      .filter({ has: page.getByRole('link', { name: shortId, exact: true }) });
    assert.deepEqual((await hostRow.getByRole('cell').allTextContents()).slice(2, 4), ['created', 'far']);

    // far's gateway stops: within NODE_DEAD_SECONDS the first one marks far's host, and the overview follows live.
    await page.getByRole('link', { name: 'Overview', exact: true }).click();
    await state('far', 'up').waitFor();
    await far!.close();
    far = undefined;
    await state('far', 'unavailable').waitFor({ timeout: 15_000 });
    assert.match((await state('far', 'unavailable').getAttribute('title')) ?? '', /NODE_DEAD_SECONDS/);

    await page.getByRole('link', { name: 'Hosts', exact: true }).click();
    const badge = hostRow.locator('.badge').filter({ hasText: /^node unavailable$/ });
    await badge.waitFor();
    assert.match((await badge.getAttribute('title')) ?? '', /stopped heartbeating.*previous status back/);
    const farOption = nodeField.locator('option', { hasText: /^far / });
    assert.equal(await farOption.textContent(), 'far (1/50 hosts, unavailable)');
    assert.equal(await farOption.isDisabled(), true, 'a silent node cannot be chosen');

    await hostRow.getByRole('link', { name: shortId }).click();
    await page.getByTestId('node-unavailable').getByText('Node far is not heartbeating.').waitFor();
    assert.equal(await page.getByTestId('host-node').textContent(), 'far');
    for (const action of ['Start', 'Stop', 'Rebuild'])
      assert.equal(await page.getByRole('button', { name: action, exact: true }).isDisabled(), true, action);
    await page
      .getByTestId('desktop')
      .getByText(/out of reach with its node/)
      .waitFor();
    await shot(page, 'admin-host-node-unavailable');

    // Its owner sees it too, with what it means for them.
    const portal = await pageAs('dana', user.password, '/portal');
    await portal
      .getByTestId('node-unavailable')
      .getByText(/cannot be reached\. Your files stay on it/)
      .waitFor();
    await portal.context().close();

    // A gateway under the same NODE_NAME comes back: the host gets the status it had.
    await startFar();
    await page.goto('/admin');
    await state('far', 'up').waitFor();
    await page.goto('/admin/hosts');
    await hostRow
      .locator('.badge')
      .filter({ hasText: /^created$/ })
      .waitFor();
    await page.context().close();
  });

  it('removes a node gone for good from the overview: its host moves to the live node, stopped', async () => {
    if (!far) await startFar();
    const page = await pageAs('admin', ADMIN_PASSWORD, '/admin');
    const nodes = page.getByTestId('nodes');
    const row = (name: string) =>
      nodes.getByRole('row').filter({ has: page.getByText(name, { exact: true }) });
    await row('far').getByText('up', { exact: true }).waitFor();
    assert.equal(
      await row('far').getByRole('button', { name: 'Remove node' }).count(),
      0,
      'not while it is up',
    );
    const [farHost] = (
      (await t.request('GET', '/v1/admin/hosts')).body.hosts as { id: string; node: string }[]
    ).filter((host) => host.node === 'far');
    assert.ok(farHost, 'the previous test left a host on far');
    await far!.close();
    far = undefined;
    await row('far').getByText('unavailable', { exact: true }).waitFor({ timeout: 15_000 });
    await row('far').getByRole('button', { name: 'Remove node' }).click();
    const confirm = page.getByRole('alertdialog', { name: 'Remove node' });
    await confirm.getByText(/Its 1 host\(s\) move to the live nodes, stopped/).waitFor();
    await shot(page, 'admin-overview-remove-node');
    await confirm.getByRole('button', { name: 'Remove node far' }).click();
    await row('far').waitFor({ state: 'detached' });
    const moved = (await t.request('GET', `/v1/admin/hosts/${farHost.id}`)).body;
    assert.deepEqual([moved.node, moved.status], ['local', 'stopped']);
    await page.context().close();
  });

  it("lists a host's blocked destinations, and turns the log-only ones into an allow-list to copy", async () => {
    // Started: the rounds read the hosts the runtime holds.
    const host = (await t.createHost(user.id, egressIpId)) as { id: string };
    const now = new Date().toISOString();
    const minute = `${now.slice(0, 16)}:00.000Z`;
    runtime.egressDecisions.set(host.id, {
      counts: [
        {
          minute,
          decision: 'would_block',
          destination: 'api.example.com',
          port: 443,
          count: 3,
          lastSeen: now,
        },
        { minute, decision: 'blocked', destination: '203.0.113.50', port: 22, count: 1, lastSeen: now },
      ],
      refused: 0,
      overflowed: false,
    });
    await t.gateway.egressDecisionLog.read();
    const admin = await pageAs('admin', ADMIN_PASSWORD, `/admin/hosts/${host.id}`);
    const table = admin.getByTestId('egress-decisions');
    const wouldBlock = table.getByRole('row', { name: /api\.example\.com/ });
    await wouldBlock.filter({ hasText: 'would be blocked' }).waitFor();
    assert.deepEqual((await wouldBlock.getByRole('cell').allTextContents()).slice(0, 3), [
      'api.example.com',
      '443',
      '3',
    ]);
    await table
      .getByRole('row', { name: /203\.0\.113\.50/ })
      .filter({ hasText: 'blocked' })
      .waitFor();
    await admin.getByRole('button', { name: 'Turn this log into an allow-list' }).click();
    const allowList = JSON.parse(
      (await admin.getByTestId('egress-allow-list').locator('pre').textContent()) ?? '',
    );
    assert.deepEqual(allowList, {
      mode: 'enforce',
      default_action: 'allow',
      rules: [{ action: 'allow', domain: 'api.example.com', port: '443' }],
    });
    await shot(admin, 'egress-decisions');
    // The owner sees the table too, without the admin's action.
    const own = await pageAs('dana', user.password, `/portal/hosts/${host.id}`);
    await own
      .getByTestId('egress-decisions')
      .getByRole('row', { name: /api\.example\.com/ })
      .waitFor();
    assert.equal(await own.getByRole('button', { name: 'Turn this log into an allow-list' }).count(), 0);
    await own.context().close();
    await admin.context().close();
  });

  it('lists a port shared with a user under Shared with me on their host list, and opens it in a new tab', async () => {
    const owner = await t.createUser('frank');
    const erin = await t.createUser('erin');
    const created = await t.request('POST', '/v1/admin/hosts', { body: { user_id: owner.id } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const host = created.body as { id: string; short_id: string };
    const shared = await t.request('POST', `/v1/user/hosts/${host.id}/shares`, {
      token: owner.token,
      body: { port: 3000, usernames: ['erin'] },
    });
    assert.equal(shared.status, 201, JSON.stringify(shared.body));
    const page = await pageAs('erin', erin.password, '/portal');
    const item = page.getByTestId('shared-with-me').getByRole('listitem');
    await item.waitFor();
    assert.match(
      (await item.textContent()) ?? '',
      new RegExp(`^Port 3000 of host ${host.short_id}, shared by frank ${shared.body.origin} Open$`),
    );
    await shot(page, 'portal-shared-with-me');
    // Open enters through a one-time ticket in a new tab, which lands on the share's own origin with its cookie.
    const [tab] = await Promise.all([
      page.waitForEvent('popup'),
      item.getByRole('button', { name: 'Open' }).click(),
    ]);
    await tab.waitForURL(`${shared.body.origin}/`);
    assert.deepEqual(
      (await page.context().cookies(shared.body.origin)).map((cookie) => cookie.name),
      [`ccp_share_${shared.body.label}`],
    );
    // The owner's own list has nothing shared with him.
    const ownerPage = await pageAs('frank', owner.password, '/portal');
    await ownerPage.getByTestId('shared-with-me').getByText('No one has shared a port').waitFor();
    await ownerPage.context().close();
    await page.context().close();
  });
});

/** A gateway whose PUBLIC_API_URL is plain HTTP on a network: the portal says so beside the install line. */
describe('the portal of a gateway over plain HTTP, in Chromium', { skip, timeout: 120_000 }, () => {
  let t: TestGateway;
  let vite: { url: string; child: ChildProcess };
  let browser: Browser;

  before(async () => {
    const port = await freePort();
    t = await startTestGateway('sqlite', {
      HTTP_PORT: String(port),
      PUBLIC_HOST: 'gw.example.test',
      PUBLIC_API_URL: `http://gw.example.test:${port}`,
    });
    await t.listen();
    vite = await startVite(t.url);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  });
  after(async () => {
    await browser?.close();
    vite?.child.kill();
    await t?.close();
  });

  it('warns beside the install line and shows the checksum to compare with', async () => {
    const user = await t.createUser('erin');
    const created = await t.request('POST', '/v1/admin/hosts', { body: { user_id: user.id } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const context = await browser.newContext({ baseURL: vite.url });
    const page = await context.newPage();
    await page.goto('/portal');
    await signIn(page, 'erin', user.password);
    const warning = page.getByTestId('ccp-install-warning');
    await warning.waitFor();
    assert.match(
      (await warning.textContent()) ?? '',
      /Not protected in transit\. This gateway serves ccp over plain HTTP \(http:\/\/gw\.example\.test:\d+\): anyone on the network path can replace ccp/,
    );
    const served = Buffer.from(await (await fetch(`${t.url}/v1/cli/ccp.mjs`)).arrayBuffer());
    assert.equal(
      await page.getByTestId('ccp-checksum').textContent(),
      createHash('sha256').update(served).digest('hex'),
    );
    await page.screenshot({ path: `${SHOTS}everyday-portal-plain-http.png`, fullPage: true });
    await context.close();
  });

  it('warns beside the access command too, in the words its script prints first', async () => {
    const user = await t.createUser('frank');
    const created = await t.request('POST', '/v1/admin/hosts', { body: { user_id: user.id } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.match(created.body.access_warning, /^The access command goes over plain HTTP/);
    const context = await browser.newContext({ baseURL: vite.url });
    const page = await context.newPage();
    await page.goto('/portal');
    await signIn(page, 'frank', user.password);
    const warning = page.getByTestId('access-command-warning');
    await warning.waitFor();
    assert.equal(await warning.textContent(), `Not protected in transit. ${created.body.access_warning}`);
    // Right under the command it concerns, before the SSH line it points to.
    const command = page.getByTestId('access-command');
    const ssh = page.getByTestId('ssh-command');
    const top = async (locator: typeof warning) => (await locator.boundingBox())?.y ?? Number.NaN;
    assert.ok((await top(command)) < (await top(warning)), 'below the access command');
    assert.ok((await top(warning)) < (await top(ssh)), 'above the SSH line');
    // This page itself came over the loopback.
    assert.equal(await page.getByTestId('page-transport-warning').count(), 0);
    await context.close();
  });
});

/**
 * A gateway whose PUBLIC_API_URL is https, its portal opened at a plain-HTTP network address: the install and
 * `ccp init` lines use the page's address, so the notice comes from the page, not the gateway. Chromium asks for
 * http://gw.example.test:<port> and the request goes to the dev server on the loopback; the page keeps its address.
 */
describe('the portal opened over plain HTTP at a network address, in Chromium', {
  skip,
  timeout: 120_000,
}, () => {
  let t: TestGateway;
  let vite: { url: string; child: ChildProcess };
  let browser: Browser;

  before(async () => {
    const port = await freePort();
    t = await startTestGateway('sqlite', {
      HTTP_PORT: String(port),
      PUBLIC_HOST: 'gw.example.test',
      PUBLIC_API_URL: 'https://gw.example.test',
    });
    await t.listen();
    vite = await startVite(t.url);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  });
  after(async () => {
    await browser?.close();
    vite?.child.kill();
    await t?.close();
  });

  it('warns beside the install line because of the page, and not on the loopback', async () => {
    const user = await t.createUser('grace');
    const created = await t.request('POST', '/v1/admin/hosts', { body: { user_id: user.id } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const pageUrl = `http://gw.example.test:${new URL(vite.url).port}`;
    const context = await browser.newContext();
    await context.route(`${pageUrl}/**`, (route) =>
      route.continue({ url: route.request().url().replace(pageUrl, vite.url) }),
    );
    const page = await context.newPage();
    await page.goto(`${pageUrl}/portal`);
    await signIn(page, 'grace', user.password);
    const warning = page.getByTestId('page-transport-warning');
    await warning.waitFor();
    assert.equal(
      await page.getByTestId('ccp-install').textContent(),
      `curl -fsSL ${pageUrl}/v1/cli/install | sh`,
    );
    assert.match(
      (await warning.textContent()) ?? '',
      new RegExp(
        `^Not protected in transit\\. This page came over plain HTTP \\(${pageUrl.replaceAll('.', '\\.')}\\), and the install and ccp init lines use its address: anyone on the network path can change what this page shows, ccp's checksum included`,
      ),
    );
    // The gateway's own addresses are https: nothing to say about them.
    await page.getByTestId('ccp-checksum').waitFor();
    assert.equal(await page.getByTestId('ccp-install-warning').count(), 0);
    assert.equal(await page.getByTestId('access-command-warning').count(), 0);
    await page.screenshot({ path: `${SHOTS}everyday-portal-page-plain-http.png`, fullPage: true });

    // The same portal on the loopback: what the lines fetch never leaves this machine.
    const local = await browser.newPage();
    await local.goto(`${vite.url}/portal`);
    await signIn(local, 'grace', user.password);
    await local.getByTestId('ccp-checksum').waitFor();
    assert.equal(await local.getByTestId('page-transport-warning').count(), 0);
    await context.close();
    await local.close();
  });
});
