import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { labUnavailable } from '../../../test/lab/lab.js';
import { freePort, type LabGateway, startLabGateway } from '../../gateway/test/helpers/lab-gateway.js';
import { CLI_DIR, ccpDriver } from './helpers/ccp-driver.js';

const exec = promisify(execFile);

/**
 * A ccp session on a host whose maximum lifetime comes: the terminal shows the warning, `ccp extend` moves the
 * stop, and when it comes ccp ends with exit 6 saying the lifecycle policy stopped the host, and why.
 */
describe('ccp and the lifecycle policy of its host', { skip: labUnavailable(), timeout: 900_000 }, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-policy-'));
  const project = path.join(work, 'project');
  let lab: LabGateway;
  let apiUrl: string;
  let user: { id: string; password: string };
  let shortId: string;
  let hostId: string;

  const { client, ccp, run, kill } = ccpDriver({
    work,
    project,
    config: () => ({ gateway: apiUrl, short_id: shortId, session_command: 'bash --norc' }),
    password: () => user.password,
  });
  const host = async () => (await lab.t.request('GET', `/v1/admin/hosts/${hostId}`)).body;

  before(async () => {
    const [httpPort, sshPort] = [await freePort(), await freePort()];
    await exec('npm', ['run', 'bundle'], { cwd: CLI_DIR });
    apiUrl = `http://127.0.0.1:${httpPort}`;
    lab = await startLabGateway({
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: String(httpPort),
      SSH_PROXY_PORT: String(sshPort),
      PUBLIC_HOST: '127.0.0.1',
      PUBLIC_API_URL: apiUrl,
      HOST_ACTIVITY_SECONDS: '1',
      HOST_STOP_WARNING_SECONDS: '8',
    });
    user = await lab.t.createUser(`pol${randomBytes(3).toString('hex')}`);
    ({ short_id: shortId, id: hostId } = await lab.createHost(user.id));
    mkdirSync(project);
  });

  after(async () => {
    kill();
    await lab?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('shows the warning, extends with `ccp extend`, and exits 6 naming the lifetime when the stop comes', async () => {
    const home = client('a');
    const session = ccp(home, '--session life');
    await session.waitFor('ccp: session life', 600_000);
    session.type('echo ALIVE-$((6*7))\r');
    await session.waitFor('ALIVE-42', 30_000);

    // Its lifetime ends 20 s from now, whatever the start took.
    const startedAt = Date.parse((await host()).started_at);
    const lifetime = Math.ceil((Date.now() - startedAt) / 1000) + 20;
    const set = await lab.t.request('PUT', `/v1/admin/hosts/${hostId}/lifecycle-policy`, {
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
      new RegExp(`host ${shortId} keeps running until at least \\S+ \\(then lifetime`),
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
    assert.match(result.stderr, new RegExp(`host ${shortId} is not running; nothing to extend`));
  });
});
