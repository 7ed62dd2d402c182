/**
 * Attack (issue 31): a shared port serves the workspace's own code, which its owner (or anything running in the
 * workspace) writes. Its pages run in the visitor's browser, where the same visitor may have the dashboard and
 * the desktop open. A share is served on an origin of its own, but on SHARE_PORTS that origin is another port of
 * the dashboard's host, so same-site with it: cookies ignore ports. Here a page served from the workspace tries,
 * in Chromium, with the visitor signed in to the dashboard and their desktop open in the same browser: to read
 * the dashboard's token, call the API, open the desktop and the terminal as its visitor, see the share's
 * credential (the gateway must not forward it), plant a gateway cookie, and ride its cookie into another share.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { labUnavailable } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { APP_PORT, pageResult, type SharedPortHost, startSharedPortHost } from '../helpers/shared-ports.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const skip = labUnavailable() || needs('browser');

/** The shared app's script: everything it can try from the share's origin, written into #out as JSON. */
const ATTACK_SCRIPT = `
const given = new URLSearchParams(location.hash.slice(1));
const gateway = given.get('gateway');
const host = given.get('host');
const result = {};
const status = (promise) => promise.then((r) => 'status ' + r.status, (e) => 'failed ' + e.name);
const socket = (url) => new Promise((resolve) => {
  const ws = new WebSocket(url);
  ws.onopen = () => { resolve('open'); ws.close(); };
  ws.onerror = () => resolve('refused');
  setTimeout(() => resolve('timed out'), 5000);
});
(async () => {
  result.storage = document.cookie + ' ' + JSON.stringify(sessionStorage) + ' ' + JSON.stringify(localStorage);
  result.api = await status(fetch(gateway + '/v1/user/hosts', { credentials: 'include' }));
  await fetch(gateway + '/v1/user/hosts/' + host + '/vnc/vnc.html', { credentials: 'include', mode: 'no-cors' }).catch(() => {});
  await fetch(gateway + '/v1/user/hosts/' + host + '/terminal/ticket', { method: 'POST', credentials: 'include', mode: 'no-cors' }).catch(() => {});
  const ws = gateway.replace(/^http/, 'ws');
  result.desktop = await socket(ws + '/v1/user/hosts/' + host + '/vnc/websockify');
  result.terminal = await socket(ws + '/v1/user/hosts/' + host + '/terminal/ws');
  result.seen = await (await fetch('/headers', { headers: { authorization: 'Bearer planted-by-the-page' } })).json();
  await fetch('/set-cookie');
  await fetch(given.get('other') + '/', { credentials: 'include', mode: 'no-cors' }).catch(() => {});
  document.getElementById('out').textContent = JSON.stringify(result);
})();
`;
/** The dashboard's session as its page keeps it (run in the page: its CSP allows no string to be evaluated). */
const signedIn = () =>
  (
    globalThis as unknown as { sessionStorage: { getItem(key: string): string | null } }
  ).sessionStorage.getItem('ccp.session');
const ATTACK_PAGE =
  '<!doctype html><title>a shared app</title><p id="out"></p><script src="/attack.js"></script>';

describe('attack: a shared app reaching past its own origin', { skip, timeout: 900_000 }, () => {
  let s: SharedPortHost;
  let browser: Browser;
  let context: BrowserContext;
  let dashboard: Page;
  let gateway: string;

  before(async () => {
    s = await startSharedPortHost();
    await s.writePage('attack.html', ATTACK_PAGE);
    await s.writePage('attack.js', ATTACK_SCRIPT);
    await s.writePage('index.html', '<!doctype html><p id="out">the other share</p>');
    gateway = s.lab.t.url;
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true });
    // One browser profile: the visitor is signed in to the dashboard and has the desktop open in it.
    context = await browser.newContext();
    dashboard = await context.newPage();
    await dashboard.goto(`${gateway}/`);
    await dashboard.getByLabel('Username').fill(s.owner.username);
    await dashboard.getByLabel('Password').fill(`${s.owner.username}-password`);
    await dashboard.getByRole('button', { name: 'Sign in' }).click();
    await dashboard.waitForFunction(signedIn);
    const desktop = await s.lab.t.request('POST', `/v1/user/hosts/${s.host.id}/vnc/ticket`, {
      token: s.owner.token,
    });
    const viewer = await context.newPage();
    assert.equal((await viewer.goto(desktop.body.url.replace(/^https?:\/\/[^/]+/, gateway)))?.status(), 200);
  });
  after(async () => {
    await browser?.close();
    await s?.close();
  });

  it("cannot read the dashboard's token, call the API, open the desktop or the terminal, see or plant the gateway's credentials, or enter another share", async () => {
    const made = async () => {
      const created = await s.lab.t.request('POST', `/v1/user/hosts/${s.host.id}/shares`, {
        token: s.owner.token,
        body: { port: APP_PORT },
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      return created.body as { id: string; origin: string; label: string };
    };
    const attacker = await made();
    const other = await made();
    // The visitor enters the attacker's share only; the other share is theirs too, but not entered.
    const page = await context.newPage();
    /** What the gateway answered to each request of the page, opaque ones included (the page cannot see those). */
    const answered: { url: string; status: number }[] = [];
    page.on('response', (response) => answered.push({ url: response.url(), status: response.status() }));
    await page.goto(await s.ticketUrl(attacker.id, s.owner.token));
    await page.goto(
      `${attacker.origin}/attack.html#gateway=${encodeURIComponent(gateway)}&host=${s.host.id}&other=${encodeURIComponent(other.origin)}`,
    );
    const result = JSON.parse(await pageResult(page, 30_000));
    const statusOf = (path: string) => answered.find((r) => r.url.startsWith(path))?.status;

    // The dashboard's token is in its own origin's sessionStorage, out of the share's reach.
    const token = JSON.parse((await dashboard.evaluate(signedIn)) ?? '{}').token;
    assert.ok(token, 'the dashboard is signed in');
    for (const part of String(token).split('.').slice(1))
      assert.ok(!result.storage.includes(part), `the share read the token: ${result.storage}`);
    // The API takes no cookie: nothing the browser holds makes the share's request the visitor's.
    assert.notEqual(result.api, 'status 200', 'the API answered the share as its visitor');
    assert.equal(statusOf(`${gateway}/v1/user/hosts`), 401);
    // The desktop's pass is in its viewer's path, not a cookie the share's requests would carry.
    assert.equal(statusOf(`${gateway}/v1/user/hosts/${s.host.id}/vnc/vnc.html`), 401, 'the desktop answered');
    assert.equal(result.desktop, 'refused');
    assert.equal(statusOf(`${gateway}/v1/user/hosts/${s.host.id}/terminal/ticket`), 401);
    assert.equal(result.terminal, 'refused');

    // The app never sees the share's cookie nor an Authorization header, even one its own page set.
    assert.ok(!JSON.stringify(result.seen).includes('ccp_share_'), JSON.stringify(result.seen));
    assert.equal(result.seen.authorization, undefined);
    // It cannot set a cookie under the gateway's names; its own cookies pass both ways.
    const names = (await context.cookies()).map((c) => c.name);
    assert.ok(!names.includes('ccp_share_intruder'), names.join(', '));
    assert.ok(names.includes('app_cookie'), names.join(', '));
    // Its cookie reaches the other share's port too (cookies ignore ports), and opens nothing there.
    assert.ok(names.includes(`ccp_share_${attacker.label}`));
    assert.equal(statusOf(`${other.origin}/`), 401, 'one share’s credential opened another');
    const direct = await page.goto(`${other.origin}/`);
    assert.equal(direct?.status(), 401);
  });
});
