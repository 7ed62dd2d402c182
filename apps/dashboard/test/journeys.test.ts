import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { ensureLab, type LabDescription, labUnavailable } from '../../../test/lab/lab.js';
import { HOST_LABEL } from '../../gateway/src/runtime/docker-workspace-runtime.js';
import { buildTestImages, labEgressEnv } from '../../gateway/test/helpers/lab-egress.js';
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

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: `${SHOTS}${name}.png`, fullPage: true });
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
      },
      'docker',
    );
    await t.listen();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    admin = await browser.newContext({ viewport: { width: 1280, height: 800 }, baseURL: t.url });
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
    await page.getByRole('button', { name: 'Start' }).click();
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

    // Deleting the bound egress IP is refused with the API's reason.
    await page.goto(egressUrl);
    await page.getByRole('button', { name: 'Delete egress IP' }).click();
    await page.getByRole('button', { name: 'Delete lab exit' }).click();
    await page.getByText('still bound to hosts').waitFor();
    await shot(page, '08-egress-delete-refused');

    // Events: filtered by type, linked by URL.
    await page.getByRole('link', { name: 'Events' }).click();
    await page.getByLabel('Type').fill('host.started');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/type=host\.started/);
    await page.getByTestId('events-table').getByText('host.started').waitFor();
    assert.equal(await page.getByTestId('events-table').locator('tbody tr').count(), 1);
    await shot(page, '09-events');

    await page.getByRole('link', { name: 'Tasks' }).click();
    await page.getByRole('cell', { name: 'start' }).first().waitFor();
    await shot(page, '10-tasks');
    await page.getByRole('link', { name: 'Overview' }).click();
    await page.getByTestId('stats').waitFor();
    await shot(page, '11-overview');
    await page.getByRole('button', { name: 'Switch light or dark theme' }).click();
    await page.waitForFunction(() => document.documentElement.dataset.theme === 'dark');
    await shot(page, '12-overview-dark');
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
    await page.getByRole('button', { name: 'Rebuild' }).click();
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

    await page.getByRole('link', { name: 'Password' }).click();
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
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

async function userId(t: TestGateway, username: string): Promise<string> {
  const list = await t.request('GET', '/v1/admin/users');
  return list.body.users.find((u: { username: string }) => u.username === username).id;
}
