import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { labUnavailable } from '../../../test/lab/lab.js';
import { CcpWorkspace } from './helpers/ccp-workspace.js';

/**
 * A ccp session on a host whose maximum lifetime comes: the terminal shows the warning, `ccp extend` moves the
 * stop, and when it comes ccp ends with exit 6 saying the lifecycle policy stopped the host, and why.
 */
describe('ccp and the lifecycle policy of its host', { skip: labUnavailable(), timeout: 900_000 }, () => {
  const w = new CcpWorkspace('pol', { session_command: 'bash --norc' });
  const { client, ccp, run } = w.driver;
  const host = async () => (await w.lab.t.request('GET', `/v1/admin/hosts/${w.hostId}`)).body;

  before(() => w.start({ env: { HOST_ACTIVITY_SECONDS: '1', HOST_STOP_WARNING_SECONDS: '8' } }));
  after(() => w.stop());

  it('shows the warning, extends with `ccp extend`, and exits 6 naming the lifetime when the stop comes', async () => {
    const home = client('a');
    const session = ccp(home, '--session life');
    await session.waitFor('ccp: session life', 600_000);
    session.type('echo ALIVE-$((6*7))\r');
    await session.waitFor('ALIVE-42', 30_000);

    // Its lifetime ends 20 s from now, whatever the start took.
    const startedAt = Date.parse((await host()).started_at);
    const lifetime = Math.ceil((Date.now() - startedAt) / 1000) + 20;
    const set = await w.lab.t.request('PUT', `/v1/admin/hosts/${w.hostId}/lifecycle-policy`, {
      body: { idle_timeout_seconds: null, max_lifetime_seconds: lifetime, schedule: null },
    });
    assert.equal(set.status, 200, JSON.stringify(set.body));

    await session.waitFor(
      /stops in about \d+ min at \S+ \(lifetime: it ran for its maximum lifetime\)/,
      60_000,
    );
    const planned = Date.parse((await host()).lifecycle.planned_stop.at);
    const extended = await run(home, ['extend', '--seconds', '20']);
    assert.equal(extended.code, 0, extended.stderr);
    assert.match(
      extended.stdout,
      new RegExp(`host ${w.shortId} keeps running until at least \\S+ \\(then lifetime`),
    );
    const moved = (await host()).lifecycle.planned_stop;
    assert.ok(
      Date.parse(moved.at) >= planned + 20_000,
      `${moved.at} is 20 s past ${new Date(planned).toISOString()}`,
    );
    assert.equal(moved.warned_at, null);

    assert.equal(await session.exitCode(120_000), 6, session.screen);
    assert.ok(Date.now() >= Date.parse(moved.at) - 1000, 'not before the extended stop');
    assert.match(session.screen, /was stopped by the gateway at \S+ for its lifecycle policy, lifetime: /);
  });

  it('says there is nothing to extend when the host is not running', async () => {
    const result = await run(client('b'), ['extend']);
    assert.equal(result.code, 4, result.stderr);
    assert.match(result.stderr, new RegExp(`host ${w.shortId} is not running; nothing to extend`));
  });
});
