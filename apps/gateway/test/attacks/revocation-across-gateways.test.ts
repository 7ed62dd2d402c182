import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { needs } from '../../../../test/support/needs.js';
import { SseClient } from '../helpers/sse-client.js';
import { createPostgresDatabase, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/**
 * Two gateways on one PostgreSQL database: a revocation made at one must end live access held at the other, and a
 * one-time ticket made at one is good once at either; failed logins count at both.
 */
describe('attack: keeping access open through another gateway', {
  skip: needs('postgres'),
}, () => {
  let database: Awaited<ReturnType<typeof createPostgresDatabase>>;
  let a: TestGateway;
  let b: TestGateway;
  before(async () => {
    database = await createPostgresDatabase();
    const shared = { DATABASE_URL: database.url, ADMIN_JWT_SECRET: randomBytes(36).toString('base64') };
    a = await startTestGateway('postgres', { ...shared, NODE_NAME: 'a' });
    b = await startTestGateway('postgres', { ...shared, NODE_NAME: 'b' }, undefined, {
      secretsFrom: a.dataDir,
    });
    await b.listen();
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await database?.drop();
  });

  it('a password change at one gateway ends the user’s live stream at the other', async () => {
    const user = await a.createUser('held-at-b');
    const stream = await SseClient.open(`${b.url}/v1/user/sse?token=${user.token}`);
    try {
      assert.equal(stream.status, 200);
      const changed = await a.request('POST', '/v1/user/change-password', {
        token: user.token,
        body: { old_password: user.password, new_password: 'changed-at-a-1' },
      });
      assert.equal(changed.status, 200, JSON.stringify(changed.body));
      await stream.waitFor((s) => s.ended, 5_000);
    } finally {
      stream.close();
    }
  });

  it('a desktop ticket issued at one gateway opens the desktop at the other, and only once anywhere', async () => {
    const user = await a.createUser('desk-at-b');
    const host = await a.createHost(user.id, await a.createEgressIp('198.51.100.41'), { node: 'a' });
    const issued = await a.request('POST', `/v1/user/hosts/${host.id}/vnc/ticket`, {
      token: user.token,
    });
    assert.equal(issued.status, 200, JSON.stringify(issued.body));
    const path = (issued.body.url as string).replace(/^https?:\/\/[^/]+/, '');
    const atB = await fetch(`${b.url}${path}`, { redirect: 'manual' });
    assert.equal(atB.status, 303, 'the other gateway takes the ticket');
    assert.match(atB.headers.get('location') ?? '', /\/vnc\/pass\/[^/]+\/vnc\.html\?/);
    assert.equal((await fetch(`${b.url}${path}`, { redirect: 'manual' })).status, 401, 'not twice there');
    assert.equal((await a.request('GET', path, { token: null })).status, 401, 'nor back where it was made');
  });

  it('a bootstrap session hands off once in all, whichever gateway the poll reaches', async () => {
    const user = await a.createUser('boot-at-both');
    await a.createHost(user.id, await a.createEgressIp('198.51.100.42', 'boot-exit'), {
      node: 'a',
      start: false,
    });
    const created = await a.request('POST', '/v1/bootstrap/sessions', {
      token: null,
      body: { username: 'boot-at-both', password: user.password },
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    await a.gateway.tasks.idle();
    const atA = await a.request('GET', `${created.body.status_url}/handoff`, {
      token: null,
      headers: { 'x-bootstrap-secret': created.body.handoff_secret },
    });
    assert.equal(atA.status, 200, JSON.stringify(atA.body));
    const atB = await b.request('GET', `${created.body.status_url}/handoff`, {
      token: null,
      headers: { 'x-bootstrap-secret': created.body.handoff_secret },
    });
    assert.equal(atB.status, 409, 'a second handoff at the other gateway would be a second SSH ticket');
    assert.equal(atB.body.code, 'handoff_used');
  });

  it('failed logins count across gateways: spreading guesses over both gains no attempts', async () => {
    const user = await a.createUser('guessed-at-both');
    const wrong = { username: 'guessed-at-both', password: 'not-the-password' };
    const atB = () =>
      fetch(`${b.url}/v1/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(wrong),
      });
    for (let i = 0; i < 5; i++) {
      assert.equal((await a.request('POST', '/v1/auth/login', { token: null, body: wrong })).status, 401);
      assert.equal((await atB()).status, 401);
    }
    const refusedAtA = await a.request('POST', '/v1/auth/login', {
      token: null,
      body: { username: 'guessed-at-both', password: user.password },
    });
    assert.equal(refusedAtA.status, 429, 'ten failures in all, even the right password waits');
    assert.equal((await atB()).status, 429);
  });
});
