import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { FakeDesktop, openStream } from '../helpers/fake-desktop.js';
import { MemoryRuntime } from '../helpers/memory-runtime.js';
import { until } from '../helpers/openssh.js';
import { rawRequest } from '../helpers/raw-http.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const socks = {
  label: 'exit',
  ip_address: '198.51.100.31',
  proxy_config: { type: 'socks', server: '198.51.100.31', server_port: 1080, version: '5' },
};

/** A raw request, so paths reach the gateway exactly as written (fetch would normalise `..`). */
for (const kind of DATABASES) {
  describe(`the desktop proxy (${kind})`, () => {
    let t: TestGateway;
    let desktop: FakeDesktop;
    let runtime: MemoryRuntime;
    let alice: { id: string; token: string };
    let bob: { id: string; token: string };
    let aliceHost: string;
    let bobHost: string;
    let base: string;
    /** Set to have the desktop refuse the gateway's password. */
    let refuse = false;

    before(async () => {
      runtime = new MemoryRuntime();
      desktop = new FakeDesktop(() =>
        refuse ? [] : [...runtime.hosts.values()].map((host) => host.spec.desktopPassword),
      );
      runtime.desktopEndpoint = { host: '127.0.0.1', port: await desktop.listen() };
      t = await startTestGateway(kind, {}, runtime);
      await t.listen();
      alice = await t.createUser('alice');
      bob = await t.createUser('bob');
      const exit = (await t.request('POST', '/v1/admin/egress-ips', { body: socks })).body.id;
      for (const owner of [alice, bob]) {
        const host = await t.request('POST', '/v1/admin/hosts', {
          body: { user_id: owner.id, egress_ip_id: exit },
        });
        await t.request('POST', `/v1/admin/hosts/${host.body.id}/start`);
        if (owner === alice) aliceHost = host.body.id;
        else bobHost = host.body.id;
      }
      await t.gateway.tasks.idle();
      base = `/v1/user/hosts/${aliceHost}/vnc`;
    });
    after(async () => {
      await t.close();
      desktop.close();
    });

    const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
    const ws = (path: string) => `${t.url.replace('http', 'ws')}${path}`;
    /** The desktop pass prefix of a user's host, as a browser gets it: a ticket, then its redirect. */
    const desktopPassPath = async (hostId: string, token: string) => {
      const ticket = await t.request('POST', `/v1/user/hosts/${hostId}/vnc/ticket`, { token });
      const opened = await rawRequest(t.url, ticket.body.url.replace(/^https?:\/\/[^/]+/, ''));
      return /^(.*\/vnc\/pass\/[^/]+)\/vnc\.html\?/.exec(String(opened.headers.location))![1]!;
    };
    type LoggedEvent = { level: string; message: string; data: Record<string, unknown> };
    /** A host's events of one type, newest first, once `enough` holds: session events are written beside the
     * relay, so they may land after the client saw the session open or close. */
    const loggedEvents = async (type: string, hostId: string, enough: (events: LoggedEvent[]) => boolean) => {
      let events: LoggedEvent[] = [];
      await until(`${type} events`, async () => {
        events = (await t.request('GET', `/v1/admin/events?type=${type}&host_id=${hostId}`)).body.events;
        return enough(events);
      });
      return events;
    };

    it("serves the gateway's own web client with a valid token, for GET and HEAD", async () => {
      const page = await rawRequest(t.url, `${base}/vnc.html`, { ...bearer(alice.token), cookie: 'other=1' });
      assert.equal(page.status, 200);
      assert.match(page.body, /<title>Desktop · cloud-cli-proxy<\/title>/);
      assert.equal(page.headers['content-type'], 'text/html; charset=utf-8');
      assert.match(String(page.headers['content-security-policy']), /script-src 'self'/);
      const head = await rawRequest(t.url, `${base}/vnc.html`, bearer(alice.token), 'HEAD');
      assert.equal(head.status, 200);
      assert.equal(head.body, '');
      const library = await rawRequest(t.url, `${base}/core/rfb.js`, bearer(alice.token));
      assert.equal(library.status, 200);
      assert.equal(library.headers['content-type'], 'text/javascript; charset=utf-8');
      assert.deepEqual(desktop.requests, [], 'the workspace was never asked for a file');
      // Admins reach every host's desktop on the admin path.
      const admin = await rawRequest(
        t.url,
        `/v1/admin/hosts/${aliceHost}/vnc/vnc.html`,
        bearer(t.adminToken),
      );
      assert.equal(admin.status, 200);
    });

    it('refuses missing, wrong-role and other-user tokens, for files and streams', async () => {
      assert.equal((await rawRequest(t.url, `${base}/vnc.html`)).status, 401);
      assert.equal((await rawRequest(t.url, `${base}/vnc.html`, bearer('not-a-token'))).status, 401);
      assert.equal((await rawRequest(t.url, `${base}/vnc.html`, bearer(t.adminToken))).status, 403);
      assert.equal(
        (await rawRequest(t.url, `/v1/admin/hosts/${aliceHost}/vnc/vnc.html`, bearer(alice.token))).status,
        403,
      );
      assert.equal((await rawRequest(t.url, `${base}/vnc.html`, bearer(bob.token))).status, 404);
      const othersTicket = await t.request('POST', `/v1/user/hosts/${aliceHost}/vnc/ticket`, {
        token: bob.token,
      });
      assert.equal(othersTicket.status, 404);
      const before = desktop.upgrades.length;
      assert.deepEqual(await openStream(ws(`${base}/websockify`), {}), { status: 401 });
      assert.deepEqual(await openStream(ws(`${base}/websockify`), bearer(t.adminToken)), { status: 403 });
      assert.deepEqual(await openStream(ws(`${base}/websockify`), bearer(bob.token)), { status: 404 });
      assert.equal(desktop.upgrades.length, before, 'no refused stream reached the desktop');
    });

    it('trades a one-time ticket for a pass in the path (no cookie), which then admits that host only', async () => {
      const ticket = await t.request('POST', `/v1/user/hosts/${aliceHost}/vnc/ticket`, {
        token: alice.token,
      });
      assert.equal(ticket.status, 200);
      const page = `${base}/vnc.html?autoconnect=true&resize=scale&path=${base.slice(1)}/websockify`;
      assert.match(ticket.body.url, new RegExp(`^http://[^/]+${page.replace(/[?.]/g, '\\$&')}&ticket=ccpt_`));
      const first = await rawRequest(t.url, ticket.body.url.replace(/^https?:\/\/[^/]+/, ''));
      assert.equal(first.status, 303);
      assert.equal(first.headers['set-cookie'], undefined, 'no cookie: cookies ignore ports');
      const location = String(first.headers.location);
      const passBase = /^(.*\/vnc\/pass\/[^/]+)\/vnc\.html\?/.exec(location)?.[1] ?? '';
      assert.ok(passBase.startsWith(`${base}/pass/`), location);
      const passPage = `${passBase}/vnc.html?autoconnect=true&resize=scale&path=${passBase.slice(1)}/websockify`;
      assert.equal(location, passPage);
      assert.ok(!location.includes(alice.token.split('.')[2]!), 'the path holds no API token');
      assert.equal((await rawRequest(t.url, `${passBase}/vnc.html`)).status, 200);
      assert.equal((await rawRequest(t.url, `${passBase}/core/rfb.js`)).status, 200);
      // The pass's prefix alone leads to the page, set to connect to the stream under the same prefix.
      assert.equal((await rawRequest(t.url, `${passBase}/`)).headers.location, passPage);
      const details = await t.request('GET', `/v1/user/hosts/${aliceHost}`, { token: alice.token });
      assert.equal(details.body.vnc_url.replace(/^https?:\/\/[^/]+/, ''), page);
      // The same pass presented for another host, and a forged one.
      const pass = passBase.slice(`${base}/pass/`.length);
      assert.equal(
        (await rawRequest(t.url, `/v1/user/hosts/${bobHost}/vnc/pass/${pass}/vnc.html`)).status,
        401,
      );
      assert.equal((await rawRequest(t.url, `${base}/pass/${pass}x/vnc.html`)).status, 401);
      // An admin's ticket opens the admin path; a stopped host has no ticket.
      const admin = await t.request('POST', `/v1/admin/hosts/${aliceHost}/vnc/ticket`);
      assert.match(admin.body.url, new RegExp(`/v1/admin/hosts/${aliceHost}/vnc/vnc\\.html\\?`));
      const wrongRole = await t.request('POST', `/v1/user/hosts/${aliceHost}/vnc/ticket`);
      assert.equal(wrongRole.status, 403);
    });

    it('refuses path traversal and anything but a plain relative path', async () => {
      const before = desktop.requests.length;
      for (const path of [
        `${base}/../../../etc/passwd`,
        `${base}/app/../../vnc.html`,
        `${base}/..%2f..%2fetc%2fpasswd`,
        `${base}/%2e%2e/etc/passwd`,
        `${base}/app\\..\\vnc.html`,
        `${base}//etc/passwd`,
      ]) {
        const response = await rawRequest(t.url, path, bearer(alice.token));
        assert.ok([400, 404].includes(response.status), `${path}: ${response.status}`);
      }
      assert.deepEqual(
        desktop.requests.slice(before).map((r) => r.url),
        [],
        'nothing reached the desktop',
      );
    });

    it('checks the Origin of upgrades that carry a pass, and takes no cookie', async () => {
      const passBase = await desktopPassPath(aliceHost, alice.token);
      const own = new URL(t.url).host;
      const foreign = await openStream(ws(`${passBase}/websockify`), { origin: 'https://evil.example' });
      assert.deepEqual(foreign, { status: 403 });
      // Another port of the same host is another origin (a shared app on SHARE_PORTS).
      const otherPort = await openStream(ws(`${passBase}/websockify`), { origin: 'http://127.0.0.1:1' });
      assert.deepEqual(otherPort, { status: 403 });
      // A cookie of the old desktop opens nothing any more.
      const cookie = 'ccp_vnc=anything';
      assert.deepEqual(await openStream(ws(`${base}/websockify`), { cookie, origin: `http://${own}` }), {
        status: 401,
      });
      const same = await openStream(ws(`${passBase}/websockify`), { cookie, origin: `http://${own}` });
      assert.ok('banner' in same);
      assert.equal(same.banner, 'RFB 003.008\n');
      assert.equal(desktop.upgrades.at(-1)!.cookie, undefined);
      assert.equal(desktop.upgrades.at(-1)!.authorization, undefined);
      same.socket.close();
    });

    it('relays both ways, counts the session and closes it when the user is disabled', async () => {
      const opened = await openStream(ws(`${base}/websockify`), bearer(alice.token));
      assert.ok('socket' in opened);
      const echoed = new Promise<string>((resolve) =>
        opened.socket.once('message', (d: Buffer) => resolve(d.toString())),
      );
      opened.socket.send(Buffer.from('hello desktop'));
      assert.equal(await echoed, 'hello desktop');
      assert.equal((await t.request('GET', '/v1/admin/dashboard/stats')).body.sessions.vnc, 1);

      const closed = new Promise<[number, string]>((resolve) =>
        opened.socket.once('close', (code, reason) => resolve([code, reason.toString()])),
      );
      await t.request('PATCH', `/v1/admin/users/${alice.id}`, { body: { status: 'disabled' } });
      assert.deepEqual(await closed, [1008, 'user_disabled']);
      await t.request('PATCH', `/v1/admin/users/${alice.id}`, { body: { status: 'active' } });
      alice.token = await t.login('alice', 'alice-password');

      const [last] = await loggedEvents(
        'vnc.session.closed',
        aliceHost,
        ([latest]) => latest?.data.reason === 'user_disabled',
      );
      // Counted past the handshake, which the gateway holds with each side itself.
      assert.equal(last!.data.bytes_in, 'hello desktop'.length);
      assert.equal(last!.data.bytes_out, 'hello desktop'.length);
      assert.equal((await t.request('GET', '/v1/admin/dashboard/stats')).body.sessions.vnc, 0);
    });

    it("counts a person's keys and pointer as the host's activity, not a viewer's own update requests", async () => {
      const lastActivity = async () => (await t.request('GET', `/v1/admin/hosts/${bobHost}`)).body.lifecycle;
      // Bob's: Alice's host stopped when she was disabled above.
      const opened = await openStream(ws(`/v1/user/hosts/${bobHost}/vnc/websockify`), bearer(bob.token));
      assert.ok('socket' in opened, JSON.stringify(opened));
      const echoes = (count: number) =>
        new Promise<void>((resolve) => {
          let left = count;
          const seen = () => {
            if (--left === 0) {
              opened.socket.off('message', seen);
              resolve();
            }
          };
          opened.socket.on('message', seen);
        });
      try {
        const before = await lastActivity();
        // ClientInit, the encodings, then update requests: what a viewer left open sends on its own.
        const encodings = Buffer.alloc(12);
        encodings[0] = 2;
        encodings.writeUInt16BE(2, 2);
        const updateRequest = Buffer.from([3, 1, 0, 0, 0, 0, 4, 0, 3, 0]);
        const sent = [Buffer.from([1]), encodings, updateRequest, updateRequest, updateRequest];
        const relayed = echoes(sent.length);
        for (const message of sent) opened.socket.send(message);
        await relayed;
        await t.gateway.sessionInput.record();
        assert.deepEqual(await lastActivity(), before, 'no activity from a viewer nobody uses');
        // A key pressed and the pointer moved.
        const typedAt = Date.now();
        const input = echoes(2);
        opened.socket.send(Buffer.from([4, 1, 0, 0, 0, 0, 0, 0x61]));
        opened.socket.send(Buffer.from([5, 0, 0, 10, 0, 20]));
        await input;
        await t.gateway.sessionInput.record();
        const after = await lastActivity();
        assert.equal(after.last_activity_signal, 'session');
        assert.ok(Date.parse(after.last_activity_at) >= typedAt, JSON.stringify(after));
      } finally {
        opened.socket.close();
      }
    });

    it('holds back the desktop while the browser does not read (backpressure)', async () => {
      // The user was disabled above, which stops the user's hosts: start this one again.
      await t.request('POST', `/v1/admin/hosts/${aliceHost}/start`);
      await t.gateway.tasks.idle();
      const opened = await openStream(ws(`${base}/websockify`), bearer(alice.token));
      assert.ok('socket' in opened);
      const client = opened.socket;
      client.pause();
      const upstream = desktop.streams.at(-1)!;
      const chunk = Buffer.alloc(64 * 1024, 7);
      const total = 48 * 1024 * 1024;
      for (let sent = 0; sent < total; sent += chunk.length) upstream.send(chunk);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      // Socket buffers hold a few MB; the rest must still wait at the desktop, not pile up in the gateway.
      assert.ok(
        upstream.bufferedAmount > 24 * 1024 * 1024,
        `only ${upstream.bufferedAmount} bytes held back`,
      );
      let received = 0;
      const all = new Promise<void>((resolve) =>
        client.on('message', (data: Buffer) => {
          received += data.length;
          if (received >= total) resolve();
        }),
      );
      client.resume();
      await all;
      assert.equal(received, total);
      client.close();
    });

    it("answers the desktop's password itself, and ends the stream when the desktop refuses it", async () => {
      const refusedBefore = desktop.refused;
      refuse = true;
      try {
        const opened = await openStream(ws(`${base}/websockify`), bearer(alice.token));
        assert.ok('closed' in opened, JSON.stringify(opened));
        assert.equal(opened.closed, 1011);
        assert.match(opened.reason, /the desktop refused the gateway: Authentication failure/);
      } finally {
        refuse = false;
      }
      assert.equal(desktop.refused, refusedBefore + 1);
    });

    it('says when a desktop asks for no password (an older workspace), and how to give it one', async () => {
      const before = (await loggedEvents('vnc.session.opened', aliceHost, () => true)).length;
      desktop.withoutPassword = true;
      try {
        const opened = await openStream(ws(`${base}/websockify`), bearer(alice.token));
        assert.ok('socket' in opened, JSON.stringify(opened));
        opened.socket.close();
      } finally {
        desktop.withoutPassword = false;
      }
      const [latest, earlier] = await loggedEvents(
        'vnc.session.opened',
        aliceHost,
        (all) => all.length > before,
      );
      assert.equal(latest!.level, 'warn');
      assert.equal(latest!.data.desktop_locked, false);
      assert.match(latest!.message, /has no password .*rebuild the host/);
      assert.equal(earlier!.level, 'info');
      assert.equal(earlier!.data.desktop_locked, true);
    });

    it('reports the desktop of a stopped host and refuses to start it', async () => {
      await t.request('POST', `/v1/admin/hosts/${bobHost}/stop`);
      await t.gateway.tasks.idle();
      const status = await t.request('GET', `/v1/user/hosts/${bobHost}/vnc/status`, { token: bob.token });
      assert.equal(status.status, 200);
      assert.equal(status.body.status, 'host_stopped');
      assert.equal(status.body.can_start, false);
      const start = await t.request('POST', `/v1/user/hosts/${bobHost}/vnc/restart`, { token: bob.token });
      assert.equal(start.status, 409);
      assert.equal(start.body.code, 'host_not_running');
      const other = await t.request('GET', `/v1/user/hosts/${bobHost}/vnc/status`, { token: alice.token });
      assert.equal(other.status, 404);
      const page = await rawRequest(t.url, `/v1/user/hosts/${bobHost}/vnc/vnc.html`, bearer(bob.token));
      assert.equal(page.status, 409);
    });
  });
}
