import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';
import { labUnavailable } from '../../../../test/lab/lab.js';
import { openStream } from '../helpers/fake-desktop.js';
import { type LabGateway, startLabGateway } from '../helpers/lab-gateway.js';
import { type PixelShares, pixelShares } from '../helpers/pixels.js';
import type { TestGateway } from '../helpers/test-gateway.js';

const exec = promisify(execFile);
const skip = labUnavailable();
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const OUTPUT = fileURLToPath(new URL('../../../../test-output/', import.meta.url));
/** The root window's colour set by ccp-desktop (image/README.md): proof that the desktop itself was drawn. */
const BACKGROUND = [0x3a, 0x6e, 0xa5] as const;

async function until<T>(what: string, check: () => Promise<T | null | undefined | false>, ms = 30_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe('the browser desktop of a real workspace', { skip, timeout: 900_000 }, () => {
  const suffix = randomBytes(3).toString('hex');
  let lab: LabGateway;
  let t: TestGateway;
  let user: { id: string; token: string };
  let host: { id: string; short_id: string; vnc_url: string };
  let container: string;

  const status = async () =>
    (await t.request('GET', `/v1/user/hosts/${host.id}/vnc/status`, { token: user.token })).body;
  const inWorkspace = async (script: string) =>
    (await exec('docker', ['exec', container, 'sh', '-c', script])).stdout.trim();
  /** What the desktop's supervisor and its parts said, for a failure's message. */
  const desktopLogs = async () => {
    const logs = await exec('docker', ['logs', '--tail', '30', container]).catch((error: Error) => error);
    const parts = await inWorkspace('tail -n 5 /run/ccp-desktop/*.log; ps -eo pid,stat,user,args').catch(
      (error: Error) => error.message,
    );
    return `${'stderr' in logs ? logs.stderr : logs}\n${parts}`;
  };
  const events = async (type: string) =>
    (await t.request('GET', `/v1/admin/events?type=${type}&host_id=${host.id}&limit=500`)).body.events as {
      data: Record<string, number | string>;
    }[];

  before(async () => {
    lab = await startLabGateway();
    t = lab.t;
    user = await t.createUser(`vnc${suffix}`);
    const created = await lab.createHost(user.id);
    await lab.startHost(created.id);
    host = (await t.request('GET', `/v1/user/hosts/${created.id}`, { token: user.token })).body;
    container = `ccp-ws-${host.id}`;
  });

  after(() => lab?.close());

  it('comes up with the host: display :1, websocket port 6080, served only on the link address', async () => {
    const current = await until('the desktop', async () => {
      const s = await status();
      return s.status === 'running' && s;
    });
    assert.deepEqual(current, {
      status: 'running',
      running: true,
      can_start: false,
      can_restart: true,
      auto_restart_limited: false,
      display: ':1',
      websocket_port: 6080,
    });
    // The desktop runs as the workspace user; websockify listens on the link address only.
    const owners = await inWorkspace('ps -o user= -C Xtigervnc,websockify,openbox | sort -u');
    assert.equal(owners, `vnc${suffix}`);
    const listening = await inWorkspace("ss -Hltn 'sport = :6080' | awk '{print $4}'");
    assert.equal(listening, '169.254.77.2:6080');
    // The VNC password: root's as the gateway put it there, the user's copy for the VNC server (image/README.md).
    const password = await inWorkspace(
      'stat -c "%U %a" /etc/ccp-desktop/vncpasswd /run/ccp-desktop-auth/vncpasswd',
    );
    assert.equal(password, `root 600\nvnc${suffix} 600`);
    assert.match(await inWorkspace('ps -o args= -C Xtigervnc'), /-SecurityTypes VncAuth -PasswordFile /);
    const admin = await t.request('GET', `/v1/admin/hosts/${host.id}/vnc/status`);
    assert.equal(admin.body.status, 'running');
    // Brought up when the gateway asked, once the start's checks had passed, not by the supervisor's fallback.
    const logs = await exec('docker', ['logs', container]);
    assert.match(logs.stderr, /ccp-desktop: first start requested \(start\)/, await desktopLogs());
    assert.doesNotMatch(logs.stderr, /no start requested within/);
  });

  it('the watchdog restarts a killed VNC server 3 times in 60 s, then leaves it stopped until a start', async () => {
    const vncPid = () => inWorkspace('cat /run/ccp-desktop/vnc.pid');
    for (let kill = 1; kill <= 4; kill++) {
      const before = await vncPid();
      await inWorkspace(`kill -KILL ${before}`);
      if (kill <= 3) {
        await until(`restart ${kill}`, async () => {
          const s = await status();
          return s.status === 'running' && (await vncPid()) !== before;
        });
      }
    }
    const limited = await until('the watchdog limit', async () => {
      const s = await status();
      return s.status === 'stopped' && s;
    });
    assert.equal(limited.auto_restart_limited, true);
    assert.equal(limited.running, false);
    assert.equal(limited.can_start, true);
    // It stays down: the watchdog does not try again by itself.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    assert.equal((await status()).status, 'stopped');

    const started = await t.request('POST', `/v1/user/hosts/${host.id}/vnc/start`, { token: user.token });
    assert.equal(started.status, 200, `${JSON.stringify(started.body)}\n${await desktopLogs()}`);
    assert.equal(started.body.status, 'running');
    assert.equal(started.body.auto_restart_limited, false);
    // "Up" means usable at once: the web client answers through the proxy right after the call.
    const page = await fetch(`${t.url}/v1/user/hosts/${host.id}/vnc/vnc.html`, {
      headers: { authorization: `Bearer ${user.token}` },
    });
    assert.equal(page.status, 200);

    const before = await vncPid();
    const restarted = await t.request('POST', `/v1/admin/hosts/${host.id}/vnc/restart`);
    assert.equal(restarted.status, 200, JSON.stringify(restarted.body));
    assert.equal(restarted.body.status, 'running');
    assert.notEqual(await vncPid(), before);
    assert.equal((await events('vnc.started')).length, 1);
    assert.equal((await events('vnc.restarted')).length, 1);
  });

  it('a real browser opens vnc_url, noVNC connects through the gateway and the desktop is drawn', async () => {
    assert.ok(existsSync(CHROMIUM), `Chromium is needed at ${CHROMIUM} (apt package chromium)`);
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true });
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
      // vnc_url, with a one-time ticket, as the dashboard opens it.
      const ticket = await t.request('POST', `/v1/user/hosts/${host.id}/vnc/ticket`, { token: user.token });
      assert.equal(ticket.status, 200, JSON.stringify(ticket.body));
      const published = new URL(host.vnc_url);
      const url = new URL(ticket.body.url);
      assert.equal(
        `${url.pathname}${url.search}`.replace(/&ticket=[^&]+$/, ''),
        `${published.pathname}${published.search}`,
      );
      // The published URL names the public address; the test gateway listens on a port of its own.
      const response = await page.goto(`${t.url}${url.pathname}${url.search}`);
      assert.equal(response?.status(), 200);
      // The ticket left the address bar for a path holding a pass for this host's desktop, and no cookie is set
      // (cookies ignore ports: a shared app on another port of this host would send it).
      assert.doesNotMatch(page.url(), /ticket=|token=/);
      assert.match(
        new URL(page.url()).pathname,
        new RegExp(`^/v1/user/hosts/${host.id}/vnc/pass/[^/]+/vnc\\.html$`),
      );
      assert.ok(!page.url().includes(user.token.split('.')[2]!), 'the path holds no API token');
      assert.deepEqual(await page.context().cookies(), []);

      await page.waitForSelector('#screen canvas', { timeout: 20_000 });
      await until(
        'the connected state',
        () => page.evaluate("document.getElementById('status')?.textContent === 'Connected'"),
        20_000,
      );
      // The screenshot is kept either way (the CI keeps test-output/), so a failure can be looked at.
      mkdirSync(OUTPUT, { recursive: true });
      let share: PixelShares = { colour: 0, light: 0 };
      const deadline = Date.now() + 20_000;
      do {
        const png = await page.screenshot();
        writeFileSync(path.join(OUTPUT, 'vnc-desktop.png'), png);
        share = await pixelShares(page, png, BACKGROUND);
        // The root window's colour over much of the screen, and the xterm's white window on it.
        if (share.colour > 0.25 && share.light > 0.05) break;
        await new Promise((resolve) => setTimeout(resolve, 250));
      } while (Date.now() < deadline);
      assert.ok(
        share.colour > 0.25 && share.light > 0.05,
        `pixel shares ${JSON.stringify(share)}\n${await desktopLogs()}`,
      );

      // The first terminal says where the rest is; a right-click on the desktop opens the menu, whose first
      // entry opens another terminal.
      assert.match(
        await inWorkspace('ps -o args= -C xterm'),
        /-title Terminal - Right-click the desktop for the menu: Terminal, Browser\. /,
      );
      const click = { x: 900, y: 600 };
      const underMenu = { x: click.x + 5, y: click.y + 4, width: 50, height: 12 };
      const backgroundShare = async (name: string) => {
        const png = await page.screenshot({ clip: underMenu });
        writeFileSync(path.join(OUTPUT, `vnc-desktop-${name}.png`), await page.screenshot());
        return (await pixelShares(page, png, BACKGROUND)).colour;
      };
      assert.ok((await backgroundShare('before-menu')) > 0.95, 'the desktop is bare where the menu will be');
      await page.mouse.click(click.x, click.y, { button: 'right' });
      await until('the menu', async () => (await backgroundShare('menu')) < 0.2, 10_000);
      const terminals = () => inWorkspace(`pgrep -c -u vnc${suffix} -x xterm || true`);
      assert.equal(await terminals(), '1');
      await page.mouse.click(click.x + 30, click.y + 10);
      await until('a second terminal', async () => (await terminals()) === '2', 10_000);

      const stats = await t.request('GET', '/v1/admin/dashboard/stats');
      assert.equal(stats.body.sessions.vnc, 1);
      assert.equal((await events('vnc.session.opened')).length, 1);
      await page.close();
    } finally {
      await browser.close();
    }
    const [closed] = await until('the session-closed event', async () => {
      const list = await events('vnc.session.closed');
      return list.length > 0 && list;
    });
    assert.ok((closed!.data.bytes_out as number) > 10_000, JSON.stringify(closed!.data));
    assert.ok((closed!.data.bytes_in as number) > 0);
    assert.equal(typeof closed!.data.duration_ms, 'number');
    assert.equal(closed!.data.reason, 'client_closed');
  });

  it('the viewer tries a failed first connection again by itself, three times, then offers Reconnect', async () => {
    // The desktop's web side gone and its supervisor frozen, so nothing brings it back until the test says (the
    // bracket keeps pkill from matching the shell that runs it).
    const supervisor = await inWorkspace('cat /run/ccp-desktop/supervisor.pid');
    const takeDown = () => inWorkspace(`kill -STOP ${supervisor} && pkill -KILL -f 'websockif[y] --web'`);
    const bringBack = async () => {
      await inWorkspace(`kill -CONT ${supervisor}`);
      const restarted = await t.request('POST', `/v1/admin/hosts/${host.id}/vnc/restart`);
      assert.equal(restarted.status, 200, `${JSON.stringify(restarted.body)}\n${await desktopLogs()}`);
    };
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true });
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
      // Every text the status line shows, in order, however briefly.
      // A script's text: these tests compile without the browser's types.
      await page.addInitScript(`
        const seen = (window.statusSeen = []);
        new MutationObserver(() => {
          const text = document.getElementById('status')?.textContent;
          if (text && seen.at(-1) !== text) seen.push(text);
        }).observe(document, { subtree: true, childList: true, characterData: true });
      `);
      const seen = async () => (await page.evaluate('window.statusSeen')) as string[];
      const open = async () => {
        const ticket = await t.request('POST', `/v1/user/hosts/${host.id}/vnc/ticket`, { token: user.token });
        const url = new URL(ticket.body.url);
        await page.goto(`${t.url}${url.pathname}${url.search}`);
      };

      // The desktop comes back while the viewer is trying again: it connects without a click.
      await takeDown();
      await open();
      await until('a second try', async () => (await seen()).includes('Connecting again (1 of 3)…'), 20_000);
      await bringBack();
      await until('the connected state', async () => (await seen()).at(-1) === 'Connected', 20_000);
      assert.deepEqual((await seen()).slice(0, 3), [
        'Connecting…',
        'Could not reach the desktop; trying again…',
        'Connecting again (1 of 3)…',
      ]);
      await page.waitForSelector('#screen canvas', { timeout: 20_000 });

      // It stays gone: the first try and three more, then the viewer says so and waits for a click.
      await takeDown();
      await open();
      await until(
        'the viewer to give up',
        async () => (await seen()).at(-1) === 'The connection was lost',
        20_000,
      );
      const tries = (await seen()).filter((text) => /^Connecting/.test(text));
      assert.deepEqual(tries, [
        'Connecting…',
        'Connecting again (1 of 3)…',
        'Connecting again (2 of 3)…',
        'Connecting again (3 of 3)…',
      ]);
      assert.equal(await page.locator('#reconnect').isVisible(), true);
      assert.equal(await page.locator('#screen canvas').count(), 0);
      await bringBack();
      await page.locator('#reconnect').click();
      await until(
        'the connected state after Reconnect',
        async () => (await seen()).at(-1) === 'Connected',
        20_000,
      );
      await page.waitForSelector('#screen canvas', { timeout: 20_000 });
    } finally {
      await browser.close();
      await inWorkspace(`kill -CONT ${supervisor}`);
    }
  });

  it('stopping the host closes a live stream cleanly, and then start answers 409 host_not_running', async () => {
    // Past the RFB handshake, which the gateway holds with the desktop (its password) and with us (no security).
    const opened = await openStream(
      `${t.url.replace('http', 'ws')}/v1/user/hosts/${host.id}/vnc/websockify`,
      {
        authorization: `Bearer ${user.token}`,
      },
    );
    assert.ok('socket' in opened, JSON.stringify(opened));
    assert.equal(opened.banner, 'RFB 003.008\n');
    const { socket } = opened;
    const closed = new Promise<{ code: number; reason: string }>((resolve) =>
      socket.once('close', (code, reason) => resolve({ code, reason: reason.toString() })),
    );
    await t.request('POST', `/v1/admin/hosts/${host.id}/stop`);
    await t.gateway.tasks.idle();
    const result = await closed;
    assert.equal(result.code, 1001);
    assert.match(result.reason, /host_stopped|desktop_closed/);

    assert.equal((await status()).status, 'host_stopped');
    const start = await t.request('POST', `/v1/user/hosts/${host.id}/vnc/start`, { token: user.token });
    assert.equal(start.status, 409);
    assert.equal(start.body.code, 'host_not_running');
  });
});
