import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { ensureLab, type LabDescription, labUnavailable } from '../../../test/lab/lab.js';
import { HOST_LABEL } from '../../gateway/src/runtime/container-specs.js';
import { buildTestImages, labEgressEnv } from '../../gateway/test/helpers/lab-egress.js';
import { freePort } from '../../gateway/test/helpers/lab-gateway.js';
import { pixelShares } from '../../gateway/test/helpers/pixels.js';
import {
  ADMIN_PASSWORD,
  startTestGateway,
  type TestGateway,
} from '../../gateway/test/helpers/test-gateway.js';

const exec = promisify(execFile);
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const DASHBOARD = fileURLToPath(new URL('..', import.meta.url));
const VITE = fileURLToPath(new URL('../../../node_modules/.bin/vite', import.meta.url));
const SHOTS = fileURLToPath(new URL('../../../test-output/dashboard/', import.meta.url));
const LONG = 300_000;
const skip =
  labUnavailable() ??
  (existsSync(CHROMIUM) ? undefined : `no Chromium at ${CHROMIUM} (Debian package chromium)`);
const docker = new Docker({ socketPath: '/var/run/docker.sock' });
/** The desktop's root window colour (image/README.md): noVNC drew the workspace's own screen. */
const BACKGROUND = [0x3a, 0x6e, 0xa5] as const;
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1280, height: 800 };

/** Waits until `check` holds: a page keeps showing the previous data until its new query lands. */
async function until(what: string, check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: `${SHOTS}${name}.png`, fullPage: true });
}

/** The same page at 1280×800 and at a phone's width, both saved to be looked at. */
async function shotBoth(page: Page, name: string): Promise<void> {
  await shot(page, name);
  await page.setViewportSize(PHONE);
  await shot(page, `${name}-phone`);
  await page.setViewportSize(DESKTOP);
}

/** Waits for the task shown on the page to end, and tells how (with its text when it failed). */
async function taskOutcome(page: Page): Promise<string> {
  const progress = page.getByTestId('task-progress');
  await progress
    .and(page.locator('[data-status="succeeded"], [data-status="failed"]'))
    .waitFor({ timeout: LONG });
  const status = await progress.getAttribute('data-status');
  return status === 'succeeded' ? status : `${status}: ${await progress.textContent()}`;
}

async function signIn(page: Page, username: string, password: string): Promise<void> {
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** Walks the dashboard in a real browser against a real gateway (SQLite, Docker workspaces in the network lab). */
describe('dashboard journeys in Chromium', { skip, timeout: 900_000 }, () => {
  let lab: LabDescription;
  let t: TestGateway;
  let browser: Browser;
  let admin: BrowserContext;
  let hostId = '';
  let userPassword = 'walker-password-1';
  let dashboardPort = 0;

  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    // The gateway serves whatever is in dist/: build the current source first.
    await exec(VITE, ['build', '--logLevel', 'warn'], { cwd: DASHBOARD });
    await buildTestImages();
    lab = await ensureLab();
    dashboardPort = await freePort();
    t = await startTestGateway(
      'sqlite',
      {
        ...labEgressEnv(lab),
        WORKSPACE_IMAGE_VARIANT: 'test',
        DOCKER_SOCKET: '/var/run/docker.sock',
        DASHBOARD_PORT: String(dashboardPort),
        // The browser runs on the gateway's machine here (never so for users): a gateway started ahead in the
        // background adds network interfaces, and Chromium drops the desktop's loads with ERR_NETWORK_CHANGED.
        EGRESS_GATEWAY_POOL: '0',
      },
      'docker',
    );
    await t.listen();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    admin = await browser.newContext({
      viewport: DESKTOP,
      baseURL: t.url,
      permissions: ['clipboard-read', 'clipboard-write'],
    });
  });

  after(async () => {
    await browser?.close();
    if (hostId) {
      const filters = { label: [`${HOST_LABEL}=${hostId}`] };
      for (const c of await docker.listContainers({ all: true, filters }))
        await docker.getContainer(c.Id).remove({ force: true });
      for (const v of (await docker.listVolumes({ filters })).Volumes ?? [])
        await docker
          .getVolume(v.Name)
          .remove()
          .catch(() => {});
    }
    await t?.close();
  });

  it('serves the app for deep links but keeps API 404s', async () => {
    const page = await fetch(`${t.url}/admin/hosts/some-id`);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<div id="root">/);
    const api = await fetch(`${t.url}/v1/nothing-here`);
    assert.equal(api.status, 404);
    assert.equal(((await api.json()) as { code: string }).code, 'not_found');
    // DASHBOARD_PORT: the same page, and the API it calls, on a second port.
    const second = `http://127.0.0.1:${dashboardPort}`;
    assert.match(await (await fetch(`${second}/portal`)).text(), /<div id="root">/);
    assert.equal((await fetch(`${second}/v1/admin/users`)).status, 401);
  });

  it('lets an admin create a user, an egress IP and a host, bind, start and watch it run', async () => {
    const page = await admin.newPage();
    await page.goto('/admin/hosts');
    await page.waitForURL(/\/sign-in\?next=%2Fadmin%2Fhosts/);
    await signIn(page, 'admin', 'wrong-password');
    await page
      .getByRole('alert')
      .filter({ hasText: /password/i })
      .waitFor();
    await shot(page, '01-sign-in-error');
    await signIn(page, 'admin', ADMIN_PASSWORD);
    await page.waitForURL('**/admin/hosts');
    await page.getByTestId('live-state').filter({ hasText: 'live' }).waitFor();

    // Users: local validation first, then the API's own refusal, then a created user with its secret shown once.
    await page.getByRole('link', { name: 'Users', exact: true }).click();
    const userForm = page.getByRole('form', { name: 'Create user' });
    await userForm.getByLabel('Username').fill('-w');
    await userForm.getByLabel('Password').fill('short');
    await userForm.getByRole('button', { name: 'Create user' }).click();
    await userForm.getByText('At least 8 characters').waitFor();
    await userForm.getByText(/3 to 50 characters/).waitFor();
    await shot(page, '02-users-validation');
    await userForm.getByLabel('Username').fill('walker');
    await userForm.getByLabel('Password').fill(userPassword);
    await userForm.getByRole('button', { name: 'Create user' }).click();
    await page.getByText('User walker created').waitFor();
    const sshPass = await page.getByTestId('secret-ssh password').textContent();
    assert.match(sshPass ?? '', /^[A-Za-z0-9]{20}$/);
    await page.getByRole('link', { name: 'walker' }).waitFor();
    await shot(page, '03-users-created');
    await page.getByRole('button', { name: 'Done, hide it' }).click();
    assert.equal(await page.getByTestId('secret-ssh password').count(), 0);
    assert.equal((await page.content()).includes(sshPass!), false, 'the secret left the page');
    await userForm.getByLabel('Username').fill('WALKER');
    await userForm.getByLabel('Password').fill('another-password');
    await userForm.getByRole('button', { name: 'Create user' }).click();
    await userForm.getByText(/already/).waitFor();

    // Egress IP: the SOCKS form, then the three checks of a real test through the lab.
    const exit = lab.exits[0]!;
    const socks = exit.variants['socks-auth'].proxyConfig;
    await page.getByRole('link', { name: 'Egress IPs' }).click();
    const egressForm = page.getByRole('form', { name: 'Create egress IP' });
    await egressForm.getByLabel('Protocol').selectOption('vmess');
    await egressForm.getByRole('button', { name: 'Create egress IP' }).click();
    await egressForm.getByText('Required').first().waitFor();
    assert.equal(await egressForm.getByLabel('User id (UUID)').count(), 1);
    await shot(page, '04-egress-validation');
    await egressForm.getByLabel('Protocol').selectOption('socks');
    assert.equal(await egressForm.getByLabel('User id (UUID)').count(), 0, 'only the fields of SOCKS');
    await egressForm.getByLabel('Label', { exact: true }).fill('lab exit');
    await egressForm.getByLabel('Exit IP address').fill(exit.address);
    await egressForm.getByLabel('Server').fill(socks.server);
    await egressForm.getByLabel('Port').fill(String(socks.server_port));
    await egressForm.getByLabel('Username (optional)').fill(socks.username!);
    await egressForm.getByLabel('Password (optional)').fill(socks.password!);
    await egressForm.getByRole('button', { name: 'Create egress IP' }).click();
    await page.waitForURL(/\/admin\/egress-ips\/[0-9a-f-]{36}$/);
    const egressUrl = page.url();
    assert.equal(await page.getByLabel('Password (optional)').inputValue(), '', 'secrets are write-only');
    await page.getByRole('button', { name: 'Test', exact: true }).click();
    const result = page.getByTestId('egress-test-result');
    await result.and(page.locator('[data-ok="true"]')).waitFor({ timeout: 60_000 });
    const checks = await result.textContent();
    assert.match(checks ?? '', /Connectivity \d+ ms/);
    assert.match(checks ?? '', new RegExp(`seen ${exit.address.replaceAll('.', '\\.')}`));
    await shot(page, '05-egress-tested');

    // Host: created without an egress IP, bound on its page, started with live progress.
    await page.getByRole('link', { name: 'Hosts', exact: true }).click();
    const hostForm = page.getByRole('form', { name: 'Create host' });
    await hostForm.getByLabel('User').selectOption({ label: 'walker' });
    await hostForm.getByRole('button', { name: 'Create host' }).click();
    await page
      .getByText(/created for walker/)
      .getByRole('link')
      .click();
    await page.waitForURL(/\/admin\/hosts\/[0-9a-f-]{36}$/);
    hostId = page.url().split('/').pop()!;
    await page.getByText('No egress IP bound').waitFor();
    await page.getByLabel('Bind an egress IP').selectOption({ label: `lab exit (${exit.address})` });
    await page.getByRole('button', { name: 'Bind', exact: true }).click();
    await page.getByText('active', { exact: true }).waitFor();
    await page.evaluate(() => {
      (window as any).notReloaded = true;
    });
    await page.getByRole('button', { name: 'Start', exact: true }).click();
    const progress = page.getByTestId('task-progress');
    await progress.waitFor();
    await shot(page, '06-host-starting');
    assert.equal(await taskOutcome(page), 'succeeded');
    await page.getByRole('heading', { name: /running/ }).waitFor();
    assert.equal(
      await page.evaluate(() => (window as any).notReloaded),
      true,
      'updated by SSE, not a reload',
    );
    assert.match((await page.getByTestId('access-command').textContent()) ?? '', /\/entry\/[a-z2-9]{8}/);
    await shot(page, '07-host-running');

    // The desktop: its state, a restart with progress and outcome, then noVNC opened from the page.
    const desktopPanel = page.getByTestId('desktop');
    await desktopPanel.getByText('running', { exact: true }).waitFor({ timeout: 60_000 });
    await desktopPanel.getByRole('button', { name: 'Restart desktop' }).click();
    await desktopPanel.getByRole('button', { name: 'Restarting desktop…' }).waitFor();
    await desktopPanel.getByText(/^Desktop restarted in \d+\.\d s\.$/).waitFor({ timeout: 60_000 });
    await shot(page, '07a-host-desktop-restarted');
    // What the viewer logged (noVNC says why a connection failed there), told if the desktop does not come up.
    const viewerLog: string[] = [];
    admin.on('console', (message) => viewerLog.push(`${message.type()}: ${message.text()}`));
    const [tab] = await Promise.all([
      admin.waitForEvent('page'),
      desktopPanel.getByRole('button', { name: 'Open desktop' }).click(),
    ]);
    // The tab goes to a one-time link, whose ticket the gateway trades for a path holding the desktop's pass
    // (no cookie: cookies ignore ports, so a shared app on another port of this host would send it).
    await tab.waitForURL((url) => url.pathname.endsWith('/vnc.html') && !url.searchParams.has('ticket'));
    assert.doesNotMatch(tab.url(), /token=|ticket=/, 'no API token or ticket in the address');
    assert.match(
      new URL(tab.url()).pathname,
      new RegExp(`^/v1/admin/hosts/${hostId}/vnc/pass/[^/]+/vnc\\.html$`),
    );
    assert.deepEqual(await admin.cookies(), [], 'no cookie');
    const signedIn = await page.evaluate(() => JSON.parse(sessionStorage.getItem('ccp.session') ?? '{}'));
    const signature = String(signedIn.token).split('.')[2]!;
    assert.ok(signature && !tab.url().includes(signature), 'the pass is no API token');
    await tab
      .waitForFunction(() => document.getElementById('status')?.textContent === 'Connected', null, {
        timeout: 20_000,
      })
      .catch(async (error: Error) => {
        const shown = await tab.locator('#status').textContent();
        const { body } = await t.request('GET', `/v1/admin/events?host_id=${hostId}&limit=20`);
        const { events } = body as { events: { type: string; message: string }[] };
        throw new Error(
          `${error.message}\nthe viewer said: ${shown}\nits log:\n${viewerLog.join('\n')}\nthe host's events:\n${events.map((e) => `${e.type}: ${e.message}`).join('\n')}`,
        );
      });
    await tab.waitForSelector('#screen canvas', { timeout: 20_000 });
    let share = 0;
    for (const deadline = Date.now() + 20_000; share < 0.25 && Date.now() < deadline; ) {
      const png = await tab.screenshot({ path: `${SHOTS}07b-desktop-novnc.png` });
      share = (await pixelShares(tab, png, BACKGROUND)).colour;
    }
    assert.ok(share > 0.25, `only ${(share * 100).toFixed(1)}% of the screen in the desktop's colour`);
    await tab.close();

    // Editing the egress IP: the secret stays write-only (empty, never in the page) and is kept when left empty,
    // as the test through the lab proves; deleting it while bound is refused with the API's reason.
    await page.goto(egressUrl);
    const settings = page.getByRole('form', { name: 'Save changes' });
    const secretField = settings.getByLabel('Password (optional)');
    assert.equal(await secretField.inputValue(), '');
    assert.equal(await secretField.getAttribute('placeholder'), 'unchanged');
    assert.equal(await settings.getByLabel('Username (optional)').inputValue(), socks.username);
    await settings.getByLabel('Label', { exact: true }).fill('lab exit one');
    await settings.getByRole('button', { name: 'Save changes' }).click();
    await page.getByText(/^Saved\./).waitFor();
    await page.getByRole('heading', { name: /lab exit one/ }).waitFor();
    assert.equal(await settings.getByLabel('Label', { exact: true }).inputValue(), 'lab exit one');
    assert.equal(
      (await page.content()).includes(socks.password!),
      false,
      'the stored secret is not in the page',
    );
    await page.getByRole('button', { name: 'Test', exact: true }).click();
    await page.getByRole('button', { name: /Testing/ }).waitFor({ state: 'detached', timeout: 60_000 });
    await result.and(page.locator('[data-ok="true"]')).waitFor();
    await page.getByRole('button', { name: 'Delete egress IP' }).click();
    await page.getByRole('button', { name: 'Delete lab exit one' }).click();
    await page.getByText('still bound to hosts').waitFor();
    const { short_id: shortId } = (await t.request('GET', `/v1/admin/hosts/${hostId}`)).body;
    await page.getByRole('link', { name: shortId, exact: true }).last().waitFor();
    await shotBoth(page, '08-egress-edited-delete-refused');

    // Events: every filter of the API, kept in the URL, and paging.
    await page.getByRole('link', { name: 'Events' }).click();
    const table = page.getByTestId('events-table');
    const rows = table.locator('tbody tr');
    const filters = page.getByRole('form', { name: 'Event filters' });
    await filters.getByLabel('Per page').selectOption('10');
    await filters.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/limit=10/);
    const total = Number(
      (await page.getByRole('heading', { name: /^\d+ events$/ }).textContent())?.split(' ')[0],
    );
    assert.ok(total > 10, `${total} events: too few to page through`);
    await page.getByText('1–10', { exact: true }).waitFor();
    await until('a page of 10 rows', async () => (await rows.count()) === 10);
    const newest = await rows.first().textContent();
    await page.getByRole('button', { name: 'Older' }).click();
    await page.waitForURL(/offset=10/);
    // The range shown is always that of the rows shown: while the next page loads it says so.
    await page.getByText(`11–${Math.min(20, total)}`, { exact: true }).waitFor();
    assert.notEqual(await rows.first().textContent(), newest, 'the older page shows with its range');
    await page.getByRole('button', { name: 'Newer' }).click();
    await page.getByText('1–10', { exact: true }).waitFor();
    await until('the newest page again', async () => (await rows.first().textContent()) === newest);
    await filters.getByLabel('Type').fill('host.started');
    await filters.getByLabel('User').selectOption({ label: 'walker' });
    await filters.getByLabel('Host id').fill(hostId);
    await filters.getByLabel('Since').fill('2020-01-01T00:00');
    await filters.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/type=host\.started&user_id=.*&host_id=.*&since=/);
    await table.getByText('host.started').waitFor();
    await until('only the matching event', async () => (await rows.count()) === 1);
    await shotBoth(page, '09-events');
    await filters.getByLabel('Until').fill('2020-01-02T00:00');
    await filters.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('No events match these filters.').waitFor();
    await filters.getByLabel('Host id').fill('not-a-uuid');
    await filters.getByRole('button', { name: 'Apply filters' }).click();
    await filters.getByText('Not a valid UUID').waitFor();

    await page.getByRole('link', { name: 'Tasks' }).click();
    await page.getByRole('cell', { name: 'start' }).first().waitFor();
    await shot(page, '10-tasks');
    await page.getByRole('link', { name: 'Overview' }).click();
    await page.getByTestId('stats').waitFor();
    await shotBoth(page, '11-overview');
    await page.getByRole('button', { name: 'Switch light or dark theme' }).click();
    await page.waitForFunction(() => document.documentElement.dataset.theme === 'dark');
    await shot(page, '12-overview-dark');
    await page.close();
  });

  it('lets an admin disable, enable, expire, rotate the secrets of and delete a user, naming what goes', async () => {
    const page = await admin.newPage();
    await page.goto('/admin/users');
    await signIn(page, 'admin', ADMIN_PASSWORD);
    const userForm = page.getByRole('form', { name: 'Create user' });
    await userForm.getByLabel('Username').fill('leaver');
    await userForm.getByLabel('Password').fill('leaver-password-1');
    await userForm.getByRole('button', { name: 'Create user' }).click();
    await page.getByText('User leaver created').waitFor();
    await page.getByRole('button', { name: 'Done, hide it' }).click();
    const leaverId = await userId(t, 'leaver');
    const leaverHost = (await t.request('POST', '/v1/admin/hosts', { body: { user_id: leaverId } })).body;
    const login = async (password: string) =>
      (await t.request('POST', '/v1/auth/login', { token: null, body: { username: 'leaver', password } }))
        .status;
    await page.getByRole('link', { name: 'leaver' }).click();
    await page.waitForURL(`**/admin/users/${leaverId}`);
    const heading = page.getByRole('heading', { level: 1 });

    await page.getByRole('button', { name: 'Disable' }).click();
    await heading.getByText('disabled', { exact: true }).waitFor();
    assert.equal(await login('leaver-password-1'), 403);
    await page.getByRole('button', { name: 'Enable' }).click();
    await heading.getByText('active', { exact: true }).waitFor();
    assert.equal(await login('leaver-password-1'), 200);

    // The expiry picker: a date in the past expires the account at once; "Never expires" restores it.
    const expires = page.getByLabel('Expires');
    await expires.fill('2031-05-04T10:30');
    await page.getByRole('button', { name: 'Save expiry' }).click();
    await page.getByText(/expires May 4, 2031/).waitFor();
    const chosen = await page.evaluate(() => new Date('2031-05-04T10:30').toISOString());
    const stored = (await t.request('GET', `/v1/admin/users/${leaverId}`)).body.expires_at;
    assert.equal(new Date(stored).toISOString(), chosen);
    await expires.fill('2024-01-01T00:00');
    await page.getByRole('button', { name: 'Save expiry' }).click();
    await heading.getByText('expired', { exact: true }).waitFor();
    await shotBoth(page, '13-user-expired');
    await page.getByRole('button', { name: 'Never expires' }).click();
    await heading.getByText('active', { exact: true }).waitFor();
    await page.getByText(/short id .* never expires$/).waitFor();
    assert.equal(await expires.inputValue(), '');

    // A rotated password is shown once, copyable, and works; regenerated SSH credentials likewise.
    await page.getByRole('button', { name: 'Rotate password' }).click();
    const shown = page.getByTestId('secret-password');
    const password = (await shown.textContent()) ?? '';
    assert.match(password, /^[A-Za-z0-9]{20}$/);
    await page.getByRole('status').getByRole('button', { name: 'Copy' }).click();
    await page.getByRole('status').getByRole('button', { name: 'Copied' }).waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), password);
    await shot(page, '14-user-password-rotated');
    assert.equal(await login('leaver-password-1'), 401);
    assert.equal(await login(password), 200);
    await page.getByRole('button', { name: 'Done, hide it' }).click();
    assert.equal((await page.content()).includes(password), false, 'the password left the page');
    await page.getByRole('button', { name: 'Regenerate SSH credentials' }).click();
    assert.equal(await page.getByTestId('secret-ssh user').textContent(), 'leaver');
    assert.match((await page.getByTestId('secret-ssh password').textContent()) ?? '', /^[A-Za-z0-9]{20}$/);
    await page.getByRole('button', { name: 'Done, hide it' }).click();

    // Deleting asks first, naming the account, its host and what goes with them.
    await page.getByRole('button', { name: 'Delete user' }).click();
    const question = page.getByRole('alertdialog', { name: 'Delete user' });
    await question.getByText(leaverHost.short_id, { exact: false }).waitFor();
    assert.match((await question.textContent()) ?? '', /leaver.*its host.*home volumes.*SSH keys/s);
    await shot(page, '15-user-delete-confirm');
    await question.getByRole('button', { name: 'Delete leaver' }).click();
    await page.waitForURL('**/admin/users');
    await page.getByRole('link', { name: 'walker' }).waitFor();
    // The list may still be the one from before the deletion until its refresh lands.
    await page
      .getByRole('link', { name: 'leaver', exact: true })
      .waitFor({ state: 'detached', timeout: 10_000 });
    assert.equal((await t.request('GET', `/v1/admin/hosts/${leaverHost.id}`)).status, 404);
    await page.close();
  });

  it('lets the user find their workspace and rebuild it with live progress', async () => {
    const context = await browser.newContext({ viewport: { width: 390, height: 844 }, baseURL: t.url });
    const page = await context.newPage();
    await page.goto('/portal');
    await signIn(page, 'walker', userPassword);
    await page.waitForURL('**/portal');
    await page.getByText('running').first().waitFor();
    assert.match((await page.getByTestId('access-command').textContent()) ?? '', /\/entry\//);
    await shot(page, '20-portal-phone');
    await page.setViewportSize({ width: 1280, height: 800 });

    await page.getByRole('link', { name: 'Details' }).click();
    await page.getByTestId('desktop').getByText('running', { exact: true }).waitFor({ timeout: 30_000 });
    await page.getByRole('button', { name: 'Rebuild', exact: true }).click();
    const progress = page.getByTestId('task-progress');
    await progress.waitFor();
    assert.equal(await taskOutcome(page), 'succeeded');
    await page.getByRole('heading', { name: /running/ }).waitFor();
    await shot(page, '21-portal-rebuilt');
    await context.close();
  });

  it('lets the user manage SSH keys, sign in again after a revoked token and change the password', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, baseURL: t.url });
    const page = await context.newPage();
    await page.goto('/portal/keys');
    await signIn(page, 'walker', userPassword);
    await page.waitForURL('**/portal/keys');

    await page.getByRole('button', { name: 'Generate a key pair' }).click();
    const privateKey = page.getByTestId('secret-private key');
    assert.match((await privateKey.textContent()) ?? '', /BEGIN OPENSSH PRIVATE KEY/);
    await shot(page, '22-portal-key-generated');
    await page.getByRole('button', { name: 'Done, hide it' }).click();
    assert.equal(await privateKey.count(), 0);
    await page.getByLabel('Public key').fill('ssh-ed25519 not-a-key');
    await page.getByRole('button', { name: 'Add key' }).click();
    await page.locator('.field-error').waitFor();
    await shot(page, '23-portal-key-refused');
    await page.getByRole('button', { name: 'Delete key' }).click();
    await page.getByText('No keys yet.').waitFor();

    // A token that stops working (the admin rotated the password) leads to sign-in and back to the same page.
    const rotated = await t.request('POST', `/v1/admin/users/${await userId(t, 'walker')}/rotate-password`);
    userPassword = rotated.body.new_password;
    await page.waitForURL(/\/sign-in\?next=%2Fportal%2Fkeys/);
    await signIn(page, 'walker', userPassword);
    await page.waitForURL('**/portal/keys');

    await page.getByRole('link', { name: 'Account' }).click();
    await page.getByLabel('Current password').fill(userPassword);
    await page.getByLabel('New password').fill('short');
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByText('At least 8 characters').waitFor();
    await shot(page, '24-portal-password');
    await page.getByLabel('New password').fill('walker-new-password');
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.waitForURL('**/sign-in?changed=1');
    await signIn(page, 'walker', 'walker-new-password');
    await page.waitForURL('**/portal');
    await context.close();
  });

  it('lets an admin stop, rebuild and delete the host with live progress, on a phone', async () => {
    const context = await browser.newContext({ viewport: PHONE, baseURL: t.url });
    const page = await context.newPage();
    await page.goto(`/admin/hosts/${hostId}`);
    await signIn(page, 'admin', ADMIN_PASSWORD);
    await page.getByRole('heading', { name: /running/ }).waitFor();
    await page.getByRole('button', { name: 'Stop', exact: true }).click();
    // The progress shown is the stop's own task (before the click it was the start's).
    await page
      .getByTestId('task-progress')
      .locator('strong', { hasText: /^stop$/ })
      .waitFor();
    assert.equal(await taskOutcome(page), 'succeeded');
    await page.getByRole('heading', { name: /stopped/ }).waitFor();
    const desktopPanel = page.getByTestId('desktop');
    await desktopPanel.getByText('The host is not running').waitFor();
    assert.equal(await desktopPanel.getByRole('button', { name: 'Open desktop' }).isDisabled(), true);
    await shot(page, '30-host-stopped-phone');

    // A stopped host is rebuilt and stays stopped: the progress shows the rebuild's own task.
    await page.getByRole('button', { name: 'Rebuild', exact: true }).click();
    await page
      .getByTestId('task-progress')
      .locator('strong', { hasText: /^rebuild$/ })
      .waitFor();
    assert.equal(await taskOutcome(page), 'succeeded');
    await page.getByRole('heading', { name: /stopped/ }).waitFor();

    await page.getByRole('button', { name: 'Delete host' }).click();
    const question = page.getByRole('alertdialog', { name: 'Delete host' });
    assert.match((await question.textContent()) ?? '', /containers and its home volume/);
    await shot(page, '31-host-delete-confirm-phone');
    await question.getByRole('button', { name: /^Delete host / }).click();
    await page.waitForURL('**/admin/hosts');
    await page.getByRole('form', { name: 'Create host' }).waitFor();
    assert.equal((await t.request('GET', `/v1/admin/hosts/${hostId}`)).status, 404);
    assert.deepEqual(
      await docker.listContainers({ all: true, filters: { label: [`${HOST_LABEL}=${hostId}`] } }),
      [],
    );
    await context.close();
  });
});

async function userId(t: TestGateway, username: string): Promise<string> {
  const list = await t.request('GET', '/v1/admin/users');
  return list.body.users.find((u: { username: string }) => u.username === username).id;
}
