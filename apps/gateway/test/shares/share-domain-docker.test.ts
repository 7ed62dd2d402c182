import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type Browser, chromium } from 'playwright-core';
import { labUnavailable } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { freeLoopbackPort } from '../../src/egress/loopback-ports.js';
import { rawRequest } from '../helpers/raw-http.js';
import {
  APP_PORT,
  ECHO_PAGE,
  pageResult,
  type SharedPortHost,
  startSharedPortHost,
} from '../helpers/shared-ports.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const skip = labUnavailable() || needs('browser');

describe('shares under SHARE_DOMAIN, on the main listener by host name', { skip, timeout: 900_000 }, () => {
  let s: SharedPortHost;
  let browser: Browser;
  let port: number;

  before(async () => {
    // The public address must name the port really bound: the share's origin is written from it.
    port = await freeLoopbackPort();
    s = await startSharedPortHost({ SHARE_PORTS: '', SHARE_DOMAIN: 'apps.test', HTTP_PORT: String(port) });
    await s.writePage('index.html', ECHO_PAGE);
    // No DNS: the browser maps the wildcard to the gateway, as a `*.apps.test` record would.
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--host-resolver-rules=MAP *.apps.test 127.0.0.1'],
    });
  });
  after(async () => {
    await browser?.close();
    await s?.close();
  });

  it("serves a share at <label>.SHARE_DOMAIN with its WebSocket, and nothing of the API on the share's name", async () => {
    const created = await s.lab.t.request('POST', `/v1/user/hosts/${s.host.id}/shares`, {
      token: s.owner.token,
      body: { port: APP_PORT },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.origin, `http://${created.body.label}.apps.test:${port}`);
    const context = await browser.newContext();
    const page = await context.newPage();
    const opened = await page.goto(await s.ticketUrl(created.body.id, s.owner.token));
    assert.equal(opened?.status(), 200);
    assert.equal(await pageResult(page), 'echo: ping');
    // The API's paths on the share's name are the app's (refused without the share's cookie), never the API.
    const gateway = `http://127.0.0.1:${port}`;
    const asApi = await rawRequest(gateway, '/healthz', { host: `${created.body.label}.apps.test:${port}` });
    assert.equal(asApi.status, 401);
    assert.match(asApi.body, /This share is private/);
    // The gateway's own name still serves the API; an unknown label is no share.
    assert.equal((await rawRequest(gateway, '/healthz')).status, 200);
    assert.equal((await rawRequest(gateway, '/', { host: `snothing.apps.test:${port}` })).status, 404);
    await context.close();
  });
});
