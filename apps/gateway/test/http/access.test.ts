import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { needs } from '../../../../test/support/needs.js';
import { MemoryRuntime } from '../helpers/memory-runtime.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const exec = promisify(execFile);

const socks = (exit: string) => ({
  label: `exit ${exit}`,
  ip_address: exit,
  proxy_config: { type: 'socks', server: exit, server_port: 1080, version: '5' },
});

/** Every address its own, so the shared failure limiter only counts what a test means it to. */
let addressCounter = 0;
const freshAddress = () => `192.0.2.${10 + (addressCounter++ % 200)}`;

describe('entry and bootstrap scripts pass the shell linters', () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-access-scripts-'));
  let t: TestGateway;
  before(async () => {
    t = await startTestGateway('sqlite', { PUBLIC_API_URL: "https://gw.example.test/it's" });
  });
  after(async () => {
    await t.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('renders POSIX sh that dash parses and shellcheck accepts, with the settings quoted', {
    skip: needs('dash', 'shellcheck'),
  }, async () => {
    const user = await t.createUser('lintuser');
    const host = (await t.request('POST', '/v1/admin/hosts', { body: { user_id: user.id } })).body;
    const entry = await t.request('GET', `/entry/${host.short_id}`, { token: null });
    const bootstrap = await t.request('GET', '/v1/bootstrap/script', { token: null });
    for (const [name, response] of [
      ['entry', entry],
      ['bootstrap', bootstrap],
    ] as const) {
      assert.equal(response.status, 200);
      assert.match(String(response.headers['content-type']), /^text\/x-shellscript/);
      const script = response.body as string;
      assert.ok(script.startsWith('#!/bin/sh\n'));
      assert.ok(
        script.includes(`CCP_API_URL='https://gw.example.test/it'\\''s'`),
        'the URL is one quoted word',
      );
      const file = path.join(work, `${name}.sh`);
      writeFileSync(file, script);
      await exec('dash', ['-n', file]);
      await exec('shellcheck', ['--shell=sh', '--severity=warning', file]);
    }
    assert.ok((entry.body as string).includes(`CCP_SHORT_ID='${host.short_id}'`));
  });
});

for (const kind of DATABASES) {
  describe(`entry short links and bootstrap sessions (${kind})`, () => {
    let t: TestGateway;
    let runtime: MemoryRuntime;
    let exitId: string;

    before(async () => {
      runtime = new MemoryRuntime();
      t = await startTestGateway(kind, { PUBLIC_HOST: 'gw.example.test' }, runtime);
      await t.listen();
      exitId = (await t.request('POST', '/v1/admin/egress-ips', { body: socks('198.51.100.21') })).body.id;
    });
    after(() => t.close());

    const createHost = async (userId: string, bound = true) => {
      const response = await t.request('POST', '/v1/admin/hosts', {
        body: { user_id: userId, ...(bound ? { egress_ip_id: exitId } : {}) },
      });
      assert.equal(response.status, 201, JSON.stringify(response.body));
      return response.body as { id: string; short_id: string; status: string };
    };
    const entryAuth = (shortId: string, body: Record<string, unknown>, remoteAddress = freshAddress()) =>
      t.request('POST', `/v1/entry/${shortId}/auth`, { token: null, body, remoteAddress });
    const session = (body: Record<string, unknown>, remoteAddress = freshAddress()) =>
      t.request('POST', '/v1/bootstrap/sessions', { token: null, body, remoteAddress });
    const events = async (type: string, userId: string) =>
      (await t.request('GET', `/v1/admin/events?type=${type}&user_id=${userId}`)).body.events as {
        data: Record<string, unknown>;
      }[];

    it('serves the entry script only for existing short IDs', async () => {
      const user = await t.createUser(`en1${kind}`);
      const host = await createHost(user.id);
      assert.equal((await t.request('GET', `/entry/${host.short_id}`, { token: null })).status, 200);
      for (const unknown of ['abcdefgh'.replace('a', 'z'), 'ABCDEFGH', "x';rm", 'a'.repeat(70)]) {
        const response = await t.request('GET', `/entry/${encodeURIComponent(unknown)}`, { token: null });
        assert.equal(response.status, 404, unknown);
        assert.equal(response.body.code, 'not_found');
      }
    });

    it('starts a stopped host (202), then answers with working SSH parameters (200)', async () => {
      const user = await t.createUser(`en2${kind}`);
      const host = await createHost(user.id);
      const first = await entryAuth(host.short_id, { password: user.password });
      assert.equal(first.status, 202, JSON.stringify(first.body));
      assert.equal(first.body.status, 'starting');
      const taskId = first.body.task_id;
      assert.equal((await t.request('GET', `/v1/admin/tasks/${taskId}`)).body.kind, 'start');
      await t.gateway.tasks.idle();
      const ready = await entryAuth(host.short_id, { password: user.password, task_id: taskId });
      assert.equal(ready.status, 200, JSON.stringify(ready.body));
      assert.deepEqual(ready.body, {
        status: 'ready',
        ssh_user: `en2${kind}+${host.short_id}`,
        ssh_pass: user.sshPass,
        ssh_host: 'gw.example.test',
        ssh_port: t.gateway.ssh.port,
      });
      const logged = await events('auth.entry.succeeded', user.id);
      assert.deepEqual(logged.map((e) => e.data.outcome).sort(), ['ready', 'starting']);
    });

    it('answers a poll during the start with the same task and its stage', async () => {
      const user = await t.createUser(`en3${kind}`);
      const host = await createHost(user.id);
      runtime.delayMs = 2000; // longer than a password check on a loaded machine
      try {
        const first = await entryAuth(host.short_id, { password: user.password });
        const again = await entryAuth(host.short_id, {
          password: user.password,
          task_id: first.body.task_id,
        });
        assert.equal(again.status, 202);
        assert.equal(again.body.task_id, first.body.task_id, 'no second start is queued');
        assert.equal(typeof again.body.progress, 'number');
      } finally {
        await t.gateway.tasks.idle();
        runtime.delayMs = 0;
      }
    });

    it('reports a failed start to the waiting caller instead of starting again', async () => {
      const user = await t.createUser(`en4${kind}`);
      const host = await createHost(user.id);
      runtime.failNextStart = 'path_check_failed';
      const first = await entryAuth(host.short_id, { password: user.password });
      await t.gateway.tasks.idle();
      const failed = await entryAuth(host.short_id, { password: user.password, task_id: first.body.task_id });
      assert.equal(failed.status, 409);
      assert.equal(failed.body.code, 'task_failed');
      assert.equal(failed.body.task_error.code, 'path_check_failed');
    });

    it('refuses wrong passwords, unbound hosts, disabled owners and unknown short IDs', async () => {
      const user = await t.createUser(`en5${kind}`);
      const bound = await createHost(user.id);
      const unbound = await createHost((await t.createUser(`en6${kind}`)).id, false);

      const wrong = await entryAuth(bound.short_id, { password: 'not-the-password' });
      assert.equal(wrong.status, 401);
      assert.equal(wrong.body.code, 'invalid_credentials');
      // The SSH password is not the login password.
      assert.equal((await entryAuth(bound.short_id, { password: user.sshPass })).status, 401);

      const noEgress = await entryAuth(unbound.short_id, { password: `en6${kind}-password` });
      assert.equal(noEgress.status, 409);
      assert.equal(noEgress.body.code, 'no_egress_bound');

      assert.equal((await entryAuth('zzzzzzzz', { password: 'whatever' })).status, 404);

      await t.request('PATCH', `/v1/admin/users/${user.id}`, { body: { status: 'disabled' } });
      const disabled = await entryAuth(bound.short_id, { password: user.password });
      assert.equal(disabled.status, 403);
      assert.equal(disabled.body.code, 'account_disabled');
      assert.equal(
        (await entryAuth(bound.short_id, { password: 'wrong' })).status,
        401,
        'no hint before the password',
      );
      const failed = await events('auth.entry.failed', user.id);
      assert.ok(failed.some((e) => e.data.reason === 'account_disabled'));
    });

    it('checks a short ID and its password without starting the host (ccp init, ccp doctor)', async () => {
      const user = await t.createUser(`en8${kind}`);
      const host = await createHost(user.id);
      const check = (shortId: string, password: string) =>
        t.request('POST', `/v1/entry/${shortId}/check`, {
          token: null,
          body: { password },
          remoteAddress: freshAddress(),
        });
      const good = await check(host.short_id, user.password);
      assert.equal(good.status, 200, JSON.stringify(good.body));
      assert.deepEqual(good.body, {
        short_id: host.short_id,
        username: `en8${kind}`,
        host_status: 'created',
      });
      assert.equal((await t.request('GET', `/v1/admin/hosts/${host.id}`)).body.status, 'created');
      const wrong = await check(host.short_id, 'not-the-password');
      assert.equal(wrong.status, 401);
      assert.equal(wrong.body.code, 'invalid_credentials');
      assert.equal((await check('zzzzzzzz', user.password)).status, 404);
      const failed = await events('auth.entry.failed', user.id);
      assert.ok(failed.length >= 1);
    });

    it('rate-limits entry auth per address, counting guessed short IDs', async () => {
      const user = await t.createUser(`en7${kind}`);
      const host = await createHost(user.id);
      const address = freshAddress();
      for (let i = 0; i < 10; i++) {
        const guess = await entryAuth(`zzzzzzz${'23456789'[i % 8]}`, { password: 'x' }, address);
        assert.equal(guess.status, 404);
      }
      const limited = await entryAuth(host.short_id, { password: user.password }, address);
      assert.equal(limited.status, 429);
      assert.ok(Number(limited.headers['retry-after']) > 0);
    });

    it('bootstraps: session, task status, handoff with a one-time ticket', async () => {
      const user = await t.createUser(`bs1${kind}`);
      const host = await createHost(user.id);
      runtime.delayMs = 300;
      let created: Awaited<ReturnType<typeof session>>;
      try {
        created = await session({ username: `bs1${kind}`, password: user.password });
        assert.equal(created.status, 202, JSON.stringify(created.body));
        assert.equal(created.body.status_url, `/v1/bootstrap/tasks/${created.body.task_id}`);
        const early = await t.request('GET', `${created.body.status_url}/handoff`, {
          token: null,
          headers: { 'x-bootstrap-secret': created.body.handoff_secret },
        });
        assert.equal(early.status, 409);
        assert.equal(early.body.code, 'not_ready');
      } finally {
        await t.gateway.tasks.idle();
        runtime.delayMs = 0;
      }
      const status = await t.request('GET', created.body.status_url, { token: null });
      assert.deepEqual(Object.keys(status.body).sort(), [
        'error',
        'message',
        'progress',
        'stage',
        'status',
        'task_id',
      ]);
      assert.equal(status.body.status, 'succeeded');
      assert.equal((await t.request('GET', `/v1/admin/hosts/${host.id}`)).body.status, 'running');

      const handoff = await t.request('GET', `${created.body.status_url}/handoff`, {
        token: null,
        headers: { 'x-bootstrap-secret': created.body.handoff_secret },
      });
      assert.equal(handoff.status, 200, JSON.stringify(handoff.body));
      assert.equal(handoff.body.user, `bs1${kind}+${host.short_id}`);
      assert.equal(handoff.body.host, 'gw.example.test');
      assert.equal(handoff.body.port, t.gateway.ssh.port);
      assert.match(handoff.body.password, /^ccpt_[\w-]{32}$/);
      const lifetime = Date.parse(handoff.body.expires_at) - Date.now();
      assert.ok(lifetime > 100_000 && lifetime <= 120_000, String(lifetime));
      const twice = await t.request('GET', `${created.body.status_url}/handoff`, {
        token: null,
        headers: { 'x-bootstrap-secret': created.body.handoff_secret },
      });
      assert.equal(twice.status, 409);
      assert.equal(twice.body.code, 'handoff_used');

      // A running host: the session's task succeeds at once.
      const second = await session({ username: `bs1${kind}`, password: user.password });
      await t.gateway.tasks.idle();
      const done = await t.request('GET', second.body.status_url, { token: null });
      assert.equal(done.body.status, 'succeeded');
      assert.equal(done.body.message, 'already running');
    });

    it('shows only bootstrap tasks on the bootstrap paths', async () => {
      const user = await t.createUser(`bs2${kind}`);
      const host = await createHost(user.id);
      const start = await t.request('POST', `/v1/admin/hosts/${host.id}/start`);
      await t.gateway.tasks.idle();
      for (const suffix of ['', '/handoff']) {
        const response = await t.request('GET', `/v1/bootstrap/tasks/${start.body.task_id}${suffix}`, {
          token: null,
        });
        assert.equal(response.status, 404);
      }
    });

    it('fails a handoff of a failed start with the task error', async () => {
      const user = await t.createUser(`bs3${kind}`);
      await createHost(user.id);
      runtime.failNextStart = 'egress_unreachable';
      const created = await session({ username: `bs3${kind}`, password: user.password });
      await t.gateway.tasks.idle();
      const status = await t.request('GET', created.body.status_url, { token: null });
      assert.equal(status.body.status, 'failed');
      assert.equal(status.body.error.code, 'egress_unreachable');
      const handoff = await t.request('GET', `${created.body.status_url}/handoff`, {
        token: null,
        headers: { 'x-bootstrap-secret': created.body.handoff_secret },
      });
      assert.equal(handoff.status, 409);
      assert.equal(handoff.body.code, 'task_failed');
      assert.equal(handoff.body.task_error.code, 'egress_unreachable');
    });

    it('answers each session error with its status and code', async () => {
      const lonely = await t.createUser(`bs4${kind}`);
      const noHost = await session({ username: `bs4${kind}`, password: lonely.password });
      assert.equal(noHost.status, 404);
      assert.equal(noHost.body.code, 'no_host');

      const busy = await t.createUser(`bs5${kind}`);
      const [a, b] = [await createHost(busy.id), await createHost(busy.id)];
      const ambiguous = await session({ username: `bs5${kind}`, password: busy.password });
      assert.equal(ambiguous.status, 409);
      assert.equal(ambiguous.body.code, 'host_ambiguous');
      assert.deepEqual([...ambiguous.body.hosts].sort(), [a.short_id, b.short_id].sort());
      const chosen = await session({ username: `bs5${kind}`, password: busy.password, host: b.short_id });
      assert.equal(chosen.status, 202);
      await t.gateway.tasks.idle();
      assert.equal((await t.request('GET', `/v1/admin/hosts/${b.id}`)).body.status, 'running');
      assert.equal((await t.request('GET', `/v1/admin/hosts/${a.id}`)).body.status, 'created');
      const foreign = await session({ username: `bs5${kind}`, password: busy.password, host: 'zzzzzzzz' });
      assert.equal(foreign.body.code, 'no_host');

      const unboundUser = await t.createUser(`bs6${kind}`);
      await createHost(unboundUser.id, false);
      const unbound = await session({ username: `bs6${kind}`, password: unboundUser.password });
      assert.equal(unbound.status, 409);
      assert.equal(unbound.body.code, 'no_egress_bound');

      assert.equal(
        (await session({ username: `bs6${kind}`, password: 'wrong' })).body.code,
        'invalid_credentials',
      );
      const expiring = await t.createUser(`bs7${kind}`);
      await createHost(expiring.id);
      await t.request('PUT', `/v1/admin/users/${expiring.id}/expiry`, {
        body: { expires_at: new Date(Date.now() - 1000).toISOString() },
      });
      const expired = await session({ username: `bs7${kind}`, password: expiring.password });
      assert.equal(expired.status, 403);
      assert.equal(expired.body.code, 'account_expired');
    });
  });
}
