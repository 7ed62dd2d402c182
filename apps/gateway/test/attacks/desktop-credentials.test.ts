/**
 * Attack (issue 16): the API token of whoever opens a desktop (an admin's, which manages everything) used to
 * travel in the desktop's URL (`?token=`, kept in browser history and proxy logs) and then sat in its cookie.
 * Now the page is opened with a one-time ticket for one host's desktop, which redirects to a path holding a pass
 * for that desktop alone (no cookie: cookies ignore ports, and a shared app on another port would send it):
 * neither is an API token, and both die when the password changes.
 */
import assert from 'node:assert/strict';
import type { IncomingHttpHeaders } from 'node:http';
import { after, before, describe, it, mock } from 'node:test';
import { FakeDesktop, openStream } from '../helpers/fake-desktop.js';
import { MemoryRuntime } from '../helpers/memory-runtime.js';
import { rawRequest } from '../helpers/raw-http.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

describe('attack: taking an API token from the desktop', () => {
  let t: TestGateway;
  let desktop: FakeDesktop;
  let alice: { id: string; token: string; password: string };
  let first: string;
  let second: string;

  before(async () => {
    const runtime = new MemoryRuntime();
    desktop = new FakeDesktop(() => [...runtime.hosts.values()].map((host) => host.spec.desktopPassword));
    runtime.desktopEndpoint = { host: '127.0.0.1', port: await desktop.listen() };
    t = await startTestGateway(DATABASES[0]!, {}, runtime);
    await t.listen();
    alice = await t.createUser('alice');
    const exit = await t.createEgressIp('198.51.100.31');
    const hosts: string[] = [];
    for (let i = 0; i < 2; i++) hosts.push((await t.createHost(alice.id, exit)).id);
    [first, second] = hosts as [string, string];
  });
  after(async () => {
    mock.timers.reset();
    await t.close();
    desktop.close();
  });

  const ticket = async (hostId: string, token = alice.token, portal = 'user') => {
    const response = await t.request('POST', `/v1/${portal}/hosts/${hostId}/vnc/ticket`, { token });
    assert.equal(response.status, 200, JSON.stringify(response.body));
    return response.body as { url: string; expires_at: string };
  };
  const local = (url: string) => url.replace(/^https?:\/\/[^/]+/, '');
  /** The pass prefix a ticket redirected to (`…/vnc/pass/<pass>`). */
  const passPathOf = (response: { headers: IncomingHttpHeaders }) =>
    /^(.*\/vnc\/pass\/[^/]+)\/vnc\.html\?/.exec(String(response.headers.location ?? ''))?.[1] ?? '';
  /** The token's claims and signature (its header, `{"alg":"HS256","typ":"JWT"}`, is the same for any JWT). */
  const secretParts = (token: string) => token.split('.').slice(1);

  it('the desktop URL and its pass never hold the API token, and the pass opens that one desktop', async () => {
    const before = Date.now();
    const issued = await ticket(first);
    assert.match(issued.url, /[?&]ticket=/);
    assert.doesNotMatch(issued.url, /[?&]token=/);
    for (const part of secretParts(alice.token))
      assert.ok(!issued.url.includes(part), 'no part of the token');
    const lifetime = Date.parse(issued.expires_at) - before;
    assert.ok(lifetime > 50_000 && lifetime <= 61_000, `a ticket lives about a minute, not ${lifetime} ms`);
    const details = await t.request('GET', `/v1/user/hosts/${first}`, { token: alice.token });
    assert.doesNotMatch(details.body.vnc_url, /token=|ticket=/);

    const opened = await rawRequest(t.url, local(issued.url));
    assert.equal(opened.status, 303);
    assert.doesNotMatch(String(opened.headers.location), /ticket=|token=/);
    assert.equal(opened.headers['set-cookie'], undefined, 'no cookie');
    const passPath = passPathOf(opened);
    const pass = passPath.slice(`/v1/user/hosts/${first}/vnc/pass/`.length);
    assert.ok(pass, String(opened.headers.location));
    for (const part of secretParts(alice.token)) assert.ok(!passPath.includes(part), 'no part of the token');

    assert.equal((await rawRequest(t.url, `${passPath}/vnc.html`)).status, 200);
    // The pass is no API token, and opens no other desktop, not even another of the same user's.
    const asToken = await t.request('GET', '/v1/user/hosts', { token: pass });
    assert.equal(asToken.status, 401);
    const other = `/v1/user/hosts/${second}/vnc/pass/${pass}`;
    assert.equal((await rawRequest(t.url, `${other}/vnc.html`)).status, 401);
    const stream = await openStream(`${t.url.replace('http', 'ws')}${other}/websockify`, { origin: t.url });
    assert.deepEqual(stream, { status: 401 });
  });

  it('an API token in the URL opens nothing, and is never moved into a cookie', async () => {
    const answer = await rawRequest(t.url, `/v1/user/hosts/${first}/vnc/vnc.html?token=${alice.token}`);
    assert.equal(answer.status, 401);
    assert.equal(answer.headers['set-cookie'], undefined);
    const admin = await rawRequest(t.url, `/v1/admin/hosts/${first}/vnc/vnc.html?token=${t.adminToken}`);
    assert.equal(admin.status, 401);
    assert.equal(admin.headers['set-cookie'], undefined);
  });

  it('a ticket opens once, within a minute, only the desktop and portal it was made for', async () => {
    const once = local((await ticket(first)).url);
    assert.equal((await rawRequest(t.url, once)).status, 303);
    const again = await rawRequest(t.url, once);
    assert.equal(again.status, 401);
    assert.equal(again.headers['set-cookie'], undefined);

    // However its name is spelled, the used ticket leaves the address.
    const spelled = local((await ticket(first)).url).replace('&ticket=', '&%74icket=');
    const redirected = await rawRequest(t.url, spelled);
    assert.equal(redirected.status, 303);
    assert.doesNotMatch(String(redirected.headers.location), /icket/);

    const elsewhere = local((await ticket(first)).url).replaceAll(first, second);
    assert.equal((await rawRequest(t.url, elsewhere)).status, 401, 'another host');
    const adminTicket = local((await ticket(first, t.adminToken, 'admin')).url);
    assert.equal(
      (await rawRequest(t.url, adminTicket.replace('/v1/admin/', '/v1/user/'))).status,
      401,
      'another portal',
    );
    // Not on the stream either: a WebSocket needs the pass of the page it came from.
    const onStream = local((await ticket(first)).url).replace(/vnc\.html\?/, 'websockify?');
    const upgrade = await openStream(`${t.url.replace('http', 'ws')}${onStream}`, { origin: t.url });
    assert.deepEqual(upgrade, { status: 401 });

    const late = local((await ticket(first)).url);
    mock.timers.enable({ apis: ['Date'], now: Date.now() });
    try {
      mock.timers.tick(61_000);
      assert.equal((await rawRequest(t.url, late)).status, 401, 'expired after a minute');
    } finally {
      mock.timers.reset();
    }
  });

  it('a password change ends unused tickets, the desktop pass and live streams', async () => {
    const unused = local((await ticket(first)).url);
    const passPath = passPathOf(await rawRequest(t.url, local((await ticket(first)).url)));
    const stream = await openStream(`${t.url.replace('http', 'ws')}${passPath}/websockify`, {
      origin: t.url,
    });
    assert.ok('socket' in stream, JSON.stringify(stream));
    const closed = new Promise<[number, string]>((resolve) =>
      stream.socket.once('close', (code, reason) => resolve([code, reason.toString()])),
    );
    // As another gateway sharing the database would: the token version moves on, and no revocation is
    // announced here; the periodic re-check of live sessions finds it.
    await t.gateway.repositories.users.revokeTokens(alice.id);
    assert.deepEqual(await closed, [1008, 'user_credentials_changed']);
    assert.equal((await rawRequest(t.url, unused)).status, 401, 'the unused ticket');
    assert.equal((await rawRequest(t.url, `${passPath}/vnc.html`)).status, 401, 'the pass');
  });
});
