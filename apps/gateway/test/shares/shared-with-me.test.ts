import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { assertError } from '../helpers/expect.js';
import { freePortRange } from '../helpers/shared-ports.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const PUBLIC_API_URL = 'http://127.0.0.1:8443';

for (const kind of DATABASES) {
  describe(`shares shared with a user, and a share's origin without a pass (${kind})`, () => {
    let t: TestGateway;
    let owner: { id: string; token: string };
    let bob: { id: string; token: string };
    let carol: { id: string; token: string };
    let hostId: string;
    let shortId: string;

    before(async () => {
      const first = await freePortRange(4);
      t = await startTestGateway(kind, {
        SHARE_PORTS: `${first}-${first + 3}`,
        PUBLIC_HOST: '127.0.0.1',
        PUBLIC_API_URL,
      });
      await t.listen();
      owner = await t.createUser('olga');
      bob = await t.createUser('bob');
      carol = await t.createUser('carol');
      const host = await t.createHost(owner.id, await t.createEgressIp('192.0.2.10'), { start: false });
      hostId = host.id;
      shortId = host.short_id;
    });
    after(() => t.close());

    const share = async (body: Record<string, unknown>) => {
      const created = await t.request('POST', `/v1/user/hosts/${hostId}/shares`, {
        token: owner.token,
        body,
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      return created.body as { id: string; origin: string; label: string; created_at: string };
    };
    const sharedWith = async (token: string) => {
      const listed = await t.request('GET', '/v1/user/shares/shared-with-me', { token });
      assert.equal(listed.status, 200, JSON.stringify(listed.body));
      return listed.body.items as { id: string }[];
    };

    it('lists a share for the user it names, not for another user nor its owner, and not after revocation', async () => {
      const named = await share({ port: 3000, usernames: ['bob'] });
      const privateOne = await share({ port: 3001 });
      assert.deepEqual(await sharedWith(bob.token), [
        {
          id: named.id,
          host_short_id: shortId,
          owner_username: 'olga',
          port: 3000,
          origin: named.origin,
          created_at: named.created_at,
        },
      ]);
      assert.deepEqual(await sharedWith(carol.token), []);
      assert.deepEqual(await sharedWith(owner.token), []);
      // The id listed is what bob asks a ticket with; the share the owner kept private gives him none.
      const ticket = await t.request('POST', `/v1/user/shares/${named.id}/ticket`, { token: bob.token });
      assert.equal(ticket.status, 200);
      assert.ok(ticket.body.url.startsWith(`${named.origin}/.ccp-share/enter?ticket=`));
      assertError(
        await t.request('POST', `/v1/user/shares/${privateOne.id}/ticket`, { token: bob.token }),
        404,
        'not_found',
      );
      // The list is the user portal's: no token, or an admin's, is refused.
      assert.equal((await t.request('GET', '/v1/user/shares/shared-with-me', { token: null })).status, 401);
      assert.equal((await t.request('GET', '/v1/user/shares/shared-with-me')).status, 403);

      for (const id of [named.id, privateOne.id])
        assert.equal(
          (await t.request('DELETE', `/v1/user/hosts/${hostId}/shares/${id}`, { token: owner.token })).status,
          204,
        );
      assert.deepEqual(await sharedWith(bob.token), []);
    });

    it('answers a visitor without a pass a small private page that points to the portal, and nothing of the share', async () => {
      const named = await share({ port: 3002, usernames: ['bob'] });
      const other = await share({ port: 3003 });
      const page = await fetch(`${named.origin}/some/page`);
      assert.equal(page.status, 401);
      assert.equal(page.headers.get('content-type'), 'text/html; charset=utf-8');
      assert.match(page.headers.get('content-security-policy') ?? '', /^default-src 'none';/);
      assert.equal(page.headers.get('set-cookie'), null);
      assert.equal(page.headers.get('cache-control'), 'no-store');
      const html = await page.text();
      assert.match(html, /This share is private/);
      assert.match(html, /Shared with me/);
      assert.ok(html.includes(`<a href="${PUBLIC_API_URL}/portal">`), html);
      assert.doesNotMatch(html, /<script|<style|<img|<form/i);
      for (const secret of [shortId, 'olga', 'bob', '3002', named.label])
        assert.ok(!html.includes(secret), `the page tells ${secret}`);
      const head = await fetch(`${named.origin}/`, { method: 'HEAD' });
      assert.equal(head.status, 401);
      assert.equal(head.headers.get('content-type'), 'text/html; charset=utf-8');
      // Another share's cookie is no pass here; the entry without a ticket or link is the same page.
      const withOthersCookie = await fetch(`${named.origin}/`, {
        headers: { cookie: `ccp_share_${other.label}=anything` },
      });
      assert.equal(withOthersCookie.status, 401);
      assert.equal(await withOthersCookie.text(), html);
      const entry = await fetch(`${named.origin}/.ccp-share/enter`);
      assert.equal(entry.status, 401);
      assert.equal(await entry.text(), html);
      // What is not a page visit stays the API's refusal.
      const posted = await fetch(`${named.origin}/`, { method: 'POST', body: 'x' });
      assert.equal(posted.status, 401);
      assert.match(((await posted.json()) as { error: string }).error, /private/);
      // A ticket still enters: the pass cookie is set and the browser is sent to the app.
      const ticket = await t.request('POST', `/v1/user/shares/${named.id}/ticket`, { token: bob.token });
      const entered = await fetch(ticket.body.url, { redirect: 'manual' });
      assert.equal(entered.status, 303);
      assert.match(entered.headers.get('set-cookie') ?? '', new RegExp(`^ccp_share_${named.label}=`));
    });

    it('leaves out the shares of a disabled owner and of a removed host', async () => {
      const named = await share({ port: 3004, usernames: ['bob', 'carol'] });
      assert.deepEqual(
        (await sharedWith(carol.token)).map((s) => s.id),
        [named.id],
      );
      const setStatus = (status: string) =>
        t.request('PATCH', `/v1/admin/users/${owner.id}`, { body: { status } });
      assert.equal((await setStatus('disabled')).status, 200);
      assert.deepEqual(await sharedWith(carol.token), []);
      assert.equal((await setStatus('active')).status, 200);
      assert.deepEqual(
        (await sharedWith(carol.token)).map((s) => s.id),
        [named.id],
      );
      assert.equal((await t.request('DELETE', `/v1/admin/hosts/${hostId}`)).status, 204);
      assert.deepEqual(await sharedWith(carol.token), []);
      assert.deepEqual(await sharedWith(bob.token), []);
    });
  });
}
