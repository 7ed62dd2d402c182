import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type Browser, type BrowserContext, chromium, type Page, type WebSocketRoute } from 'playwright-core';
import { labUnavailable } from '../../../test/lab/lab.js';
import { needs } from '../../../test/support/needs.js';
import { type LabGateway, startLabGateway } from '../../gateway/test/helpers/lab-gateway.js';
import { sshWithPassword } from '../../gateway/test/helpers/openssh.js';
import { ADMIN_PASSWORD } from '../../gateway/test/helpers/test-gateway.js';

const exec = promisify(execFile);
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const DASHBOARD = fileURLToPath(new URL('..', import.meta.url));
const VITE = fileURLToPath(new URL('../../../node_modules/.bin/vite', import.meta.url));
const SHOTS = fileURLToPath(new URL('../../../test-output/dashboard/', import.meta.url));
const skip = labUnavailable() || needs('docker', 'browser', 'ssh', 'sshpass');

/**
 * The host's terminal in the browser, against a real workspace: a command typed in xterm.js runs in the
 * workspace's tmux session, which real OpenSSH through the SSH proxy shows too; a phone-wide screen gets a
 * usable terminal; a dropped WebSocket comes back to the same shell.
 */
describe('the browser terminal in Chromium', { skip, timeout: 900_000 }, () => {
  const suffix = randomBytes(3).toString('hex');
  let lab: LabGateway;
  let browser: Browser;
  let user: { id: string; token: string; password: string };
  let username: string;
  let host: { id: string; short_id: string };
  const contexts: BrowserContext[] = [];

  /** What xterm.js shows now (its DOM renderer's rows), trailing blanks dropped. */
  const screenText = (page: Page) =>
    page.locator('.xterm-rows').evaluate((rows) =>
      Array.from(rows.children, (row) => (row.textContent ?? '').replace(/\u00a0/g, ' ').replace(/\s+$/, ''))
        .join('\n')
        .replace(/\s+$/, ''),
    );
  // Generous: a shared, loaded machine can take many seconds to start a shell.
  const waitForText = async (page: Page, text: string | RegExp, ms = 60_000) => {
    const deadline = Date.now() + ms;
    for (;;) {
      const shown = await screenText(page);
      if (typeof text === 'string' ? shown.includes(text) : text.test(shown)) return shown;
      if (Date.now() > deadline) throw new Error(`the terminal never showed ${text}; it shows:\n${shown}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  };
  const openTerminal = async (
    viewport: { width: number; height: number },
    phone = false,
    route?: (ws: WebSocketRoute) => void,
    as: { portal: 'portal' | 'admin'; username: string; password: string } = {
      portal: 'portal',
      username,
      password: user.password,
    },
  ) => {
    const context = await browser.newContext({
      baseURL: lab.t.url,
      viewport,
      ...(phone ? { isMobile: true, hasTouch: true, deviceScaleFactor: 3 } : {}),
    });
    contexts.push(context);
    const page = await context.newPage();
    if (route) await page.routeWebSocket(/\/terminal\/ws/, route);
    const path = `/${as.portal}/hosts/${host.id}/terminal`;
    await page.goto(path);
    await page.getByLabel('Username').fill(as.username);
    await page.getByLabel('Password').fill(as.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`**${path}`);
    await page.getByTestId('terminal-state').filter({ hasText: 'session web' }).waitFor({ timeout: 60_000 });
    // The shell's prompt (zsh's `user@host ~ % `): the session is ready for keys.
    await waitForText(page, /[%$#] ?$/m);
    return page;
  };
  const typeLine = async (page: Page, line: string) => {
    await page.locator('.xterm-helper-textarea').focus();
    await page.keyboard.type(line);
    await page.keyboard.press('Enter');
  };
  /** Runs a command in the workspace through the SSH proxy with real OpenSSH. */
  const overSsh = async (command = 'tmux capture-pane -p -t web') => {
    const result = await sshWithPassword(lab.t.gateway.ssh.port, user.password, [
      `${username}+${host.short_id}@127.0.0.1`,
      command,
    ]);
    assert.equal(result.code, 0, result.stderr);
    return result.stdout;
  };
  const events = async (type: string) =>
    (await lab.t.request('GET', `/v1/admin/events?type=${type}&host_id=${host.id}&limit=100`)).body
      .events as { data: Record<string, unknown> }[];

  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    // The gateway serves whatever is in dist/: build the current source first.
    await exec(VITE, ['build', '--logLevel', 'warn'], { cwd: DASHBOARD });
    lab = await startLabGateway();
    username = `term${suffix}`;
    user = await lab.t.createUser(username);
    host = await lab.createHost(user.id);
    await lab.startHost(host.id);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  });

  after(async () => {
    for (const context of contexts) await context.close().catch(() => {});
    await browser?.close();
    await lab?.close();
  });

  it('a command typed in the browser runs in the tmux session that SSH shows too', async () => {
    const page = await openTerminal({ width: 1280, height: 800 });
    await lab.t.gateway.sessionInput.record();
    const typedAt = Date.now();
    await typeLine(page, 'echo "browser says $((6 * 7))"');
    await waitForText(page, 'browser says 42');
    await page.screenshot({ path: `${SHOTS}terminal-desktop.png` });
    // The keys typed in the browser are the host's activity, as its idle stop reads it.
    await lab.t.gateway.sessionInput.record();
    const { lifecycle } = (await lab.t.request('GET', `/v1/admin/hosts/${host.id}`)).body;
    assert.equal(lifecycle.last_activity_signal, 'session', JSON.stringify(lifecycle));
    assert.ok(Date.parse(lifecycle.last_activity_at) >= typedAt, JSON.stringify(lifecycle));
    // xterm.js's own styles apply under the dashboard's CSP: tmux's status line keeps its colour and its blanks,
    // so it spans the row (collapsed blanks would put its right-hand side next to its left).
    const status = await page
      .locator('.xterm-rows > div')
      .last()
      .locator('span')
      .first()
      .evaluate((span) => ({
        whiteSpace: getComputedStyle(span).whiteSpace,
        background: getComputedStyle(span).backgroundColor,
        width: span.getBoundingClientRect().width,
        row: (span.parentElement as HTMLElement).getBoundingClientRect().width,
      }));
    assert.equal(status.whiteSpace, 'pre', JSON.stringify(status));
    assert.notEqual(status.background, 'rgba(0, 0, 0, 0)', JSON.stringify(status));
    assert.ok(status.width > status.row * 0.9, JSON.stringify(status));
    // The same tmux session, seen over SSH with OpenSSH: the command and its output are there.
    const seen = await overSsh();
    assert.match(seen, /echo "browser says \$\(\(6 \* 7\)\)"/);
    assert.match(seen, /^browser says 42$/m);
    const opened = await events('terminal.session.opened');
    assert.equal(opened.length, 1);
    assert.deepEqual(
      { session: opened[0]!.data.session, mode: opened[0]!.data.mode, portal: opened[0]!.data.portal },
      { session: 'web', mode: 'attach', portal: 'user' },
    );
    // The gauge counts it.
    const metrics = await lab.t.request('GET', '/metrics');
    assert.match(String(metrics.body), /^ccp_terminal_sessions 1$/m);
    await page.context().close();
  });

  it('on a 390-pixel-wide phone the terminal fits the screen and takes commands', async () => {
    const page = await openTerminal({ width: 390, height: 844 }, true);
    // Nothing wider than the screen: no sideways scrolling, the key bar and the terminal within 390 px.
    const widths = await page.evaluate(() => ({
      page: document.documentElement.scrollWidth,
      screen: document.querySelector('.xterm-screen')?.getBoundingClientRect().right ?? 0,
      keys: document.querySelector('.terminal-keys')?.getBoundingClientRect().right ?? 0,
    }));
    assert.ok(widths.page <= 390 && widths.screen <= 390 && widths.keys <= 390, JSON.stringify(widths));
    await typeLine(page, 'stty size');
    const shown = await waitForText(page, /^\d+ \d+$/m);
    const [rows, cols] = /^(\d+) (\d+)$/m.exec(shown)!.slice(1).map(Number) as [number, number];
    // A phone's width of columns at the phone's font size; rows fill the height left by the bars.
    assert.ok(cols >= 35 && cols <= 60, `columns: ${cols}`);
    assert.ok(rows >= 20, `rows: ${rows}`);
    // The key bar sends what a phone keyboard lacks: Ctrl-C ends what runs.
    await typeLine(page, 'sleep 600');
    await page.getByRole('button', { name: '^C' }).tap();
    await typeLine(page, 'echo after-ctrl-c');
    await waitForText(page, /^after-ctrl-c$/m);
    await page.screenshot({ path: `${SHOTS}terminal-phone.png` });
    await page.context().close();
  });

  it("scrolls back through tmux's history with the wheel, and copies and pastes with the buttons", async () => {
    const page = await openTerminal({ width: 1280, height: 800 });
    await page.context().grantPermissions(['clipboard-read', 'clipboard-write']);
    await typeLine(page, 'clear; seq -f "line-%g" 1 300');
    await waitForText(page, /^line-300$/m);
    assert.doesNotMatch(await screenText(page), /^line-100$/m);
    // The wheel over the terminal: tmux's copy mode, back in the session's history.
    const screen = page.getByTestId('terminal-screen');
    await screen.hover();
    for (let i = 0; i < 40 && !/^line-1\d\d$/m.test(await screenText(page)); i++) {
      await page.mouse.wheel(0, -400);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const back = await screenText(page);
    assert.match(back, /^line-1\d\d$/m, back);
    assert.match(back, /\[\d+\/\d+\]/, "tmux's copy-mode position");
    await page.screenshot({ path: `${SHOTS}terminal-scrollback.png` });
    // Typing leaves copy mode: q, then a line.
    await page.keyboard.press('q');
    await typeLine(page, 'clear; echo copy-me-please');
    await waitForText(page, /^copy-me-please$/m);
    // A double-click selects the word; Copy puts it on the clipboard, Paste types it back.
    const row = page.locator('.xterm-rows > div', { hasText: /^copy-me-please\s*$/ });
    // The rows take no pointer events (xterm's screen above them does): the click goes where the row is drawn.
    const box = (await row.boundingBox())!;
    await page.mouse.dblclick(box.x + 20, box.y + box.height / 2);
    await page.getByRole('button', { name: 'Copy' }).click();
    const copied = await page.evaluate(() => navigator.clipboard.readText());
    assert.match(copied, /copy|me|please/, copied);
    await page.evaluate(() => navigator.clipboard.writeText('echo pasted-$((2 + 3))'));
    await page.getByRole('button', { name: 'Paste' }).click();
    await waitForText(page, /% echo pasted-\$\(\(2 \+ 3\)\)$/m);
    // The focus stayed in the terminal: Enter runs the line.
    await page.keyboard.press('Enter');
    await waitForText(page, /^pasted-5$/m);
    await page.context().close();
  });

  it('a dropped WebSocket reconnects to the same shell in the same tmux session', async () => {
    const sockets: WebSocketRoute[] = [];
    const page = await openTerminal({ width: 1024, height: 700 }, false, (ws) => {
      sockets.push(ws);
      ws.connectToServer();
    });
    await typeLine(page, 'MARK=kept-$((1000 + 234))');
    await typeLine(page, 'echo "$MARK"');
    await waitForText(page, /^kept-1234$/m);
    const before = (await events('terminal.session.closed')).length;
    // The browser's side drops (as a network change does); the gateway sees its close.
    assert.equal(sockets.length, 1);
    await sockets[0]!.close({ code: 4000, reason: 'network dropped' });
    await page
      .getByTestId('terminal-state')
      .filter({ hasText: /connection lost|reconnecting/ })
      .waitFor({ timeout: 30_000 });
    await page.getByTestId('terminal-state').filter({ hasText: 'session web' }).waitFor({ timeout: 60_000 });
    assert.ok(sockets.length >= 2, 'a second WebSocket, with a new ticket');
    await typeLine(page, 'echo "still $MARK"');
    // The shell's variable is there: the same shell, not a new session.
    await waitForText(page, /^still kept-1234$/m);
    await page.screenshot({ path: `${SHOTS}terminal-reconnected.png` });
    const closed = await events('terminal.session.closed');
    assert.equal(closed.length, before + 1);
    assert.match(String(closed[0]!.data.reason), /client_closed/);
    assert.match(await overSsh(), /^still kept-1234$/m);
    await page.context().close();
  });

  it('the session menu attaches to a session ccp or SSH made, takes one over, or starts a new one', async () => {
    // A session made over SSH, as ccp makes them, with something on its screen.
    await overSsh("tmux new-session -d -s from-ssh 'echo made over ssh; exec zsh'");
    const page = await openTerminal({ width: 1280, height: 800 });
    const menu = page.getByLabel('tmux session');
    await menu
      .locator('option', { hasText: 'Attach from-ssh' })
      .waitFor({ state: 'attached', timeout: 60_000 });
    await menu.selectOption('attach:from-ssh');
    await page
      .getByTestId('terminal-state')
      .filter({ hasText: 'session from-ssh' })
      .waitFor({ timeout: 60_000 });
    await waitForText(page, 'made over ssh');
    assert.match(page.url(), /session=from-ssh/);
    // A new session: its own name, listed for SSH (and so for ccp) too.
    await menu.selectOption('new:');
    const state = page.getByTestId('terminal-state').filter({ hasText: /session web-[0-9a-f]{6}/ });
    await state.waitFor({ timeout: 60_000 });
    const created = /web-[0-9a-f]{6}/.exec((await state.textContent()) ?? '')![0];
    await waitForText(page, /[%$#] ?$/m);
    assert.match(await overSsh('tmux list-sessions -F "#{session_name}"'), new RegExp(`^${created}$`, 'm'));
    await page.screenshot({ path: `${SHOTS}terminal-new-session.png` });

    // Taking over: the browser's other terminal on `web` (a second page) is detached, with the reason.
    const other = await openTerminal({ width: 800, height: 600 });
    await menu
      .locator('option', { hasText: 'Take over web' })
      .waitFor({ state: 'attached', timeout: 60_000 });
    await menu.selectOption('take:web');
    await page.getByTestId('terminal-state').filter({ hasText: 'session web' }).waitFor({ timeout: 60_000 });
    await other
      .getByTestId('terminal-state')
      .filter({ hasText: 'another client took it over' })
      .waitFor({ timeout: 60_000 });
    await other.screenshot({ path: `${SHOTS}terminal-taken-over.png` });
    await other.context().close();
    await page.context().close();
  });

  it("an administrator opens the host's terminal from the console, as its owner's Linux user", async () => {
    const page = await openTerminal({ width: 1280, height: 800 }, false, undefined, {
      portal: 'admin',
      username: 'admin',
      password: ADMIN_PASSWORD,
    });
    await typeLine(page, 'echo "I am $(id -un)"');
    await waitForText(page, new RegExp(`^I am ${username}$`, 'm'));
    const opened = await events('terminal.session.opened');
    assert.equal(opened[0]!.data.portal, 'admin');
    await page.context().close();
  });

  it('stopping the host ends the terminal and the page says so, without retrying', async () => {
    const page = await openTerminal({ width: 1280, height: 800 });
    const stop = await lab.t.request('POST', `/v1/admin/hosts/${host.id}/stop`);
    assert.equal(stop.status, 202, JSON.stringify(stop.body));
    await page
      .getByTestId('terminal-state')
      .filter({ hasText: 'The host stopped.' })
      .waitFor({ timeout: 60_000 });
    await page.screenshot({ path: `${SHOTS}terminal-host-stopped.png` });
    const closed = await events('terminal.session.closed');
    assert.equal(closed[0]!.data.reason, 'host_stopped');
    await page.context().close();
  });
});
