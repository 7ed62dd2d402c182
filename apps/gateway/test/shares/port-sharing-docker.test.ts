import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type Browser, chromium } from 'playwright-core';
import { labUnavailable } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import {
  APP_PORT,
  ECHO_PAGE,
  pageResult,
  type SharedPortHost,
  socketClosed,
  startSharedPortHost,
} from '../helpers/shared-ports.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const skip = labUnavailable() || needs('browser');

describe('a port of a real workspace shared through the gateway', { skip, timeout: 900_000 }, () => {
  let s: SharedPortHost;
  let browser: Browser;
  /** The fake clock's lead over real time (link expiry). */
  let ahead = 0;

  const share = async (body: Record<string, unknown>, token = s.owner.token) =>
    s.lab.t.request('POST', `/v1/user/hosts/${s.host.id}/shares`, { token, body });
  /** A fresh browser profile opening `url`: the page's text, or the refusal's status. */
  const visit = async (url: string) => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const response = await page.goto(url);
    return { context, page, status: response?.status() ?? 0 };
  };

  before(async () => {
    s = await startSharedPortHost({ SHARES_PER_HOST: '3' }, { clock: () => Date.now() + ahead });
    await s.writePage('index.html', ECHO_PAGE);
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true });
  });
  after(async () => {
    await browser?.close();
    await s?.close();
  });

  it('lists the port the app listens on, on loopback only', async () => {
    const ports = await s.lab.t.request('GET', `/v1/user/hosts/${s.host.id}/ports`, { token: s.owner.token });
    assert.equal(ports.status, 200);
    assert.deepEqual(
      ports.body.items.find((p: { port: number }) => p.port === APP_PORT),
      { port: APP_PORT, loopback_only: true },
    );
    // The desktop's own ports are never offered.
    assert.ok(!ports.body.items.some((p: { port: number }) => p.port === 6080));
  });

  it('serves the page and its WebSocket to the owner on an origin of its own, private to others', async () => {
    const created = await share({ port: APP_PORT });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.origin, `http://127.0.0.1:${s.firstSharePort}`);
    assert.equal(created.body.link_url, null);
    // Without entering, the share answers nothing of the app: a page saying it opens from the portal.
    const anonymous = await fetch(`${created.body.origin}/`);
    assert.equal(anonymous.status, 401);
    assert.match(await anonymous.text(), /This share is private/);

    const owner = await visit(await s.ticketUrl(created.body.id, s.owner.token));
    assert.equal(owner.status, 200);
    assert.equal(owner.page.url(), `${created.body.origin}/`);
    assert.equal(await owner.page.textContent('#hello'), 'hello from the workspace');
    assert.equal(await pageResult(owner.page), 'echo: ping');
    const cookies = await owner.context.cookies();
    assert.equal(cookies.length, 1);
    assert.equal(cookies[0]!.name, `ccp_share_${created.body.label}`);
    assert.equal(cookies[0]!.httpOnly, true);
    // Another user (not named) gets no ticket; the one-time ticket opens once.
    const refused = await s.lab.t.request('POST', `/v1/user/shares/${created.body.id}/ticket`, {
      token: s.friend.token,
    });
    assert.equal(refused.status, 404);
    const url = await s.ticketUrl(created.body.id, s.owner.token);
    assert.equal((await fetch(url, { redirect: 'manual' })).status, 303);
    assert.equal((await fetch(url, { redirect: 'manual' })).status, 401);
    await owner.context.close();
  });

  it('opens for a user it is shared with, and by its signed link, until revoked: open WebSockets end too', async () => {
    const created = await share({
      port: APP_PORT,
      usernames: [s.friend.username],
      link_expires_in_seconds: 600,
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.deepEqual(created.body.usernames, [s.friend.username]);
    assert.match(
      created.body.link_url,
      new RegExp(`^${created.body.origin}/\\.ccp-share/enter\\?link=ccps_`),
    );
    // The link is shown once: the list has its expiry only.
    const listed = await s.lab.t.request('GET', `/v1/user/hosts/${s.host.id}/shares`, {
      token: s.owner.token,
    });
    assert.ok(!JSON.stringify(listed.body).includes('ccps_'));

    const friend = await visit(await s.ticketUrl(created.body.id, s.friend.token));
    assert.equal(friend.status, 200);
    assert.equal(await pageResult(friend.page), 'echo: ping');
    const byLink = await visit(created.body.link_url);
    assert.equal(byLink.status, 200);
    assert.equal(await pageResult(byLink.page), 'echo: ping');
    // A stranger is not let in by a ticket, nor by another share's link.
    const stranger = await s.lab.t.request('POST', `/v1/user/shares/${created.body.id}/ticket`, {
      token: s.stranger.token,
    });
    assert.equal(stranger.status, 404);

    const revoked = await s.lab.t.request('DELETE', `/v1/user/hosts/${s.host.id}/shares/${created.body.id}`, {
      token: s.owner.token,
    });
    assert.equal(revoked.status, 204);
    // The open WebSockets are closed at once, and nothing more is served.
    await socketClosed(friend.page, 1500);
    await socketClosed(byLink.page, 1500);
    assert.notEqual((await friend.page.reload())?.status(), 200);
    const again = await visit(created.body.link_url);
    assert.notEqual(again.status, 200);
    for (const v of [friend, byLink, again]) await v.context.close();
    const events = await s.lab.t.request('GET', `/v1/admin/events?host_id=${s.host.id}&limit=100`);
    const types = events.body.events.map((e: { type: string }) => e.type);
    for (const type of ['port_share.created', 'port_share.opened', 'port_share.revoked', 'port_share.closed'])
      assert.ok(types.includes(type), `${type} in ${types.join(', ')}`);
  });

  it('a link stops opening the share when it expires, and its open WebSocket ends', async () => {
    const created = await share({ port: APP_PORT, link_expires_in_seconds: 120 });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const byLink = await visit(created.body.link_url);
    assert.equal(await pageResult(byLink.page), 'echo: ping');
    ahead = 121_000;
    await socketClosed(byLink.page, 10_000);
    assert.equal((await byLink.page.reload())?.status(), 401);
    const again = await visit(created.body.link_url);
    assert.equal(again.status, 401);
    for (const v of [byLink, again]) await v.context.close();
    ahead = 0;
  });

  it('refuses what a host may not share, and more shares than a host may have', async () => {
    const desktop = await share({ port: 6080 });
    assert.equal(desktop.status, 400);
    assert.equal(desktop.body.code, 'validation_failed');
    // Two shares are left by the tests above (one revoked): a third fits, a fourth is refused.
    assert.equal((await share({ port: APP_PORT })).status, 201);
    const fourth = await share({ port: APP_PORT });
    assert.equal(fourth.status, 409);
    assert.equal(fourth.body.code, 'too_many_shares');
    assert.match(fourth.body.error, /3 shared ports, the most one host may have; revoke one first/);
    const metrics = await s.lab.t.request('GET', '/metrics');
    assert.match(String(metrics.body), /\nccp_port_shares 3\n/);
  });

  it('the portal lists the port, shares it with a link to copy, opens it in a tab and revokes it', async () => {
    // Room for one more: the tests above left the host at its limit.
    const before = await s.lab.t.request('GET', `/v1/user/hosts/${s.host.id}/shares`, {
      token: s.owner.token,
    });
    for (const old of before.body.items as { id: string }[])
      await s.lab.t.request('DELETE', `/v1/user/hosts/${s.host.id}/shares/${old.id}`, {
        token: s.owner.token,
      });
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${s.lab.t.url}/portal/hosts/${s.host.id}`);
    await page.getByLabel('Username').fill(s.owner.username);
    await page.getByLabel('Password').fill(`${s.owner.username}-password`);
    await page.getByRole('button', { name: 'Sign in' }).click();
    const panel = page.getByTestId('host-shares');
    await panel.getByText(`Port ${APP_PORT}`).waitFor({ timeout: 20_000 });
    await panel.getByLabel('Link for hours (empty: no link)').fill('1');
    await panel.getByRole('button', { name: 'Share' }).click();
    const link = await panel.getByTestId('share-link').textContent({ timeout: 10_000 });
    assert.match(link ?? '', /\/\.ccp-share\/enter\?link=ccps_/);
    await panel.getByText(/^http:\/\/127\.0\.0\.1:\d+$/).waitFor();
    const [tab] = await Promise.all([
      context.waitForEvent('page'),
      panel.getByRole('button', { name: 'Open' }).click(),
    ]);
    assert.equal(await pageResult(tab), 'echo: ping');
    await panel.getByRole('button', { name: 'Revoke' }).click();
    await socketClosed(tab, 1500);
    await panel.getByRole('button', { name: 'Open' }).waitFor({ state: 'detached' });
    await context.close();
  });
});
