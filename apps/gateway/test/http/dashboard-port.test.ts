import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { FakeDesktop, openStream } from '../helpers/fake-desktop.js';
import { freePort } from '../helpers/lab-gateway.js';
import { MemoryRuntime } from '../helpers/memory-runtime.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

for (const kind of DATABASES) {
  describe(`DASHBOARD_PORT serves the whole app, WebSockets included (${kind})`, () => {
    let t: TestGateway;
    let desktop: FakeDesktop;
    let dashboard = '';
    let user: { id: string; token: string };
    let base = '';
    let closed = false;

    before(async () => {
      const runtime = new MemoryRuntime();
      desktop = new FakeDesktop(() => [...runtime.hosts.values()].map((host) => host.spec.desktopPassword));
      runtime.desktopEndpoint = { host: '127.0.0.1', port: await desktop.listen() };
      const port = await freePort();
      t = await startTestGateway(kind, { DASHBOARD_PORT: String(port) }, runtime);
      await t.listen();
      dashboard = `127.0.0.1:${port}`;
      user = await t.createUser('dora');
      const host = await t.createHost(user.id, await t.createEgressIp('198.51.100.41'));
      base = `/v1/user/hosts/${host.id}/vnc`;
    });
    after(async () => {
      if (!closed) await t.close();
      desktop.close();
    });

    it('relays a desktop stream opened on the dashboard port, counted like any other', async () => {
      const opened = await openStream(`ws://${dashboard}${base}/websockify`, {
        authorization: `Bearer ${user.token}`,
      });
      assert.ok('socket' in opened, `refused: ${JSON.stringify(opened)}`);
      assert.equal(opened.banner, 'RFB 003.008\n');
      const echoed = new Promise<string>((resolve) =>
        opened.socket.once('message', (data: Buffer) => resolve(data.toString())),
      );
      opened.socket.send(Buffer.from('through the second port'));
      assert.equal(await echoed, 'through the second port');
      assert.equal((await t.request('GET', '/v1/admin/dashboard/stats')).body.sessions.vnc, 1);
      const gone = new Promise((resolve) => opened.socket.once('close', resolve));
      opened.socket.close();
      await gone;
    });

    it("checks the Origin against the dashboard port's own address, and the pass like the main port", async () => {
      const ticket = await t.request('POST', `${base.replace('/vnc', '')}/vnc/ticket`, { token: user.token });
      const page = await fetch(`http://${dashboard}${ticket.body.url.replace(/^https?:\/\/[^/]+/, '')}`, {
        redirect: 'manual',
      });
      assert.equal(page.status, 303);
      const passBase = /^(.*\/vnc\/pass\/[^/]+)\//.exec(page.headers.get('location')!)![1]!;
      const same = await openStream(`ws://${dashboard}${passBase}/websockify`, {
        origin: `http://${dashboard}`,
      });
      assert.ok('socket' in same, `refused: ${JSON.stringify(same)}`);
      same.socket.close();
      const foreign = await openStream(`ws://${dashboard}${passBase}/websockify`, {
        origin: 'https://evil.example',
      });
      assert.deepEqual(foreign, { status: 403 });
      assert.deepEqual(await openStream(`ws://${dashboard}${base}/websockify`, {}), { status: 401 });
    });

    it('closes streams of the dashboard port with the gateway, with a close frame', async () => {
      const opened = await openStream(`ws://${dashboard}${base}/websockify`, {
        authorization: `Bearer ${user.token}`,
      });
      assert.ok('socket' in opened);
      const ended = new Promise<[number, string]>((resolve) =>
        opened.socket.once('close', (code, reason) => resolve([code, reason.toString()])),
      );
      closed = true;
      await t.close();
      assert.deepEqual(await ended, [1001, 'gateway_stopped']);
    });
  });
}
