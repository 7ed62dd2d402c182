/**
 * Issue 30, what was blocked: a workspace's connections that its egress policy blocks (enforce), or would block
 * (log-only, where they still succeed), are counted per destination and minute from its egress gateway's log,
 * in rounds, and read back through the API. Real workspace, real tunnel (the lab's VMess exit), the workspace's
 * own user making the connections.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import type { EgressDecisions } from '@ccp/api';
import { ensureLab } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { startLabGateway } from '../helpers/lab-gateway.js';

const exec = promisify(execFile);

/** A host of a new user on a lab gateway with this policy, started; and curl as the workspace's user. */
async function policyHost(policy: object, env: Record<string, string> = {}) {
  const lab = await startLabGateway({
    EGRESS_POLICY: JSON.stringify(policy),
    // Rounds are run by the test, not by a timer.
    EGRESS_POLICY_LOG_SECONDS: '0',
    ...env,
  });
  const username = `dec${randomBytes(3).toString('hex')}`;
  const user = await lab.t.createUser(username);
  const hostId = (await lab.createHost(user.id)).id;
  await lab.startHost(hostId);
  const curl = async (...args: string[]) => {
    try {
      const { stdout } = await exec('docker', [
        'exec',
        '-u',
        username,
        `ccp-ws-${hostId}`,
        'curl',
        '-sS',
        '--max-time',
        '10',
        ...args,
      ]);
      return stdout.trim();
    } catch (error) {
      return `failed with status ${(error as { code?: number }).code}`;
    }
  };
  const decisions = async (token?: string): Promise<EgressDecisions> => {
    const portal = token ? 'user' : 'admin';
    const read = await lab.t.request('GET', `/v1/${portal}/hosts/${hostId}/egress-decisions`, {
      ...(token ? { token } : {}),
    });
    assert.equal(read.status, 200, JSON.stringify(read.body));
    return read.body;
  };
  const countOf = (read: EgressDecisions, destination: string, port: number) =>
    read.destinations.find((row) => row.destination === destination && row.port === port);
  return { lab, user, hostId, curl, decisions, countOf };
}

describe('what the egress policy would block, log-only', {
  skip: needs('lab', 'docker'),
  timeout: 600_000,
}, () => {
  let host: Awaited<ReturnType<typeof policyHost>>;
  let web: { name: string; httpUrl: string; httpsUrl: string };
  let exit: string;
  const CAP = 4;

  before(async () => {
    web = (await ensureLab()).public.web;
    host = await policyHost(
      {
        mode: 'log-only',
        default_action: 'allow',
        rules: [
          { action: 'deny', domain: web.name },
          { action: 'deny', domain: '*.cap.test' },
        ],
      },
      { EGRESS_POLICY_LOG_DESTINATIONS: String(CAP) },
    );
    exit = host.lab.lab.exits[0]!.address;
  });
  after(() => host?.lab.close());

  it('lets a would-be-denied name through and counts it, per port, for admin and owner, across rounds', async () => {
    const { lab, curl, decisions, countOf } = host;
    assert.equal(await curl(`${web.httpUrl}/ip`), exit, 'log-only blocks nothing (HTTP)');
    assert.equal(await curl(`${web.httpUrl}/ip`), exit);
    assert.equal(await curl('-k', `${web.httpsUrl}/ip`), exit, 'log-only blocks nothing (HTTPS)');
    assert.equal(await curl(`${lab.lab.internet.httpUrl}/ip`), exit, 'a destination no rule denies');
    assert.equal((await decisions()).destinations.length, 0, 'nothing before the round');

    await lab.t.gateway.egressDecisionLog.read();
    let read = await decisions();
    assert.equal(countOf(read, web.name, 80)?.count, 2, JSON.stringify(read.destinations));
    assert.equal(countOf(read, web.name, 80)?.decision, 'would_block');
    assert.equal(countOf(read, web.name, 443)?.count, 1);
    assert.equal(read.destinations.length, 2, 'the allowed destination is not recorded');
    const lastSeen = Date.parse(countOf(read, web.name, 80)!.last_seen);
    assert.ok(
      Math.abs(Date.now() - lastSeen) < 120_000,
      `last seen ${countOf(read, web.name, 80)!.last_seen}`,
    );
    assert.deepEqual(
      (await decisions(host.user.token)).destinations,
      read.destinations,
      'the owner reads the same',
    );

    // The next round adds to what is there: the log was emptied, nothing counted twice.
    assert.equal(await curl(`${web.httpUrl}/ip`), exit);
    await lab.t.gateway.egressDecisionLog.read();
    await lab.t.gateway.egressDecisionLog.read();
    read = await decisions();
    assert.equal(countOf(read, web.name, 80)?.count, 3);
    assert.equal(countOf(read, web.name, 443)?.count, 1);

    // The log as an allow-list: the exact name and port seen, ahead of the policy's rules, enforced.
    assert.deepEqual(read.allow_list.rules, [
      { action: 'allow', domain: web.name, port: '80' },
      { action: 'allow', domain: web.name, port: '443' },
    ]);
    assert.equal(read.allow_list.policy?.mode, 'enforce');
    assert.deepEqual(read.allow_list.policy?.rules.slice(0, 2), read.allow_list.rules);

    const events = await lab.t.request(
      'GET',
      `/v1/admin/events?type=host.egress_decisions&host_id=${host.hostId}`,
    );
    assert.equal(events.status, 200);
    assert.ok(events.body.events.length >= 2, 'one event a round that found decisions');
    assert.equal(
      events.body.events.reduce(
        (sum: number, event: { data: { would_block: number } }) => sum + event.data.would_block,
        0,
      ),
      4,
    );
  });

  it('past the cap on destinations a minute, counts the rest as uncounted and says so', async () => {
    const { lab, curl, decisions } = host;
    // Names no one answers: the connection fails at the exit, the decision is still made and logged.
    const names = Array.from({ length: CAP + 3 }, (_, index) => `n${index}.cap.test`);
    // All in one minute (the cap is a minute's): not in a minute's last 20 s, and all at once.
    const second = new Date().getUTCSeconds();
    if (second > 40) await sleep((61 - second) * 1000);
    await Promise.all(names.map((name) => curl('-H', `Host: ${name}`, `${lab.lab.internet.httpUrl}/ip`)));
    await lab.t.gateway.egressDecisionLog.read();
    const read = await decisions();
    const capped = read.destinations.filter((row) => row.destination.endsWith('.cap.test'));
    assert.ok(capped.length <= CAP, `${capped.length} destinations kept`);
    assert.ok(read.uncounted.length > 0, 'the capped minute is reported');
    const kept = capped.reduce((sum, row) => sum + row.count, 0);
    const uncounted = read.uncounted.reduce((sum, row) => sum + row.count, 0);
    assert.equal(kept + uncounted, names.length, 'every connection counted once, kept or uncounted');
    const events = await lab.t.request(
      'GET',
      `/v1/admin/events?type=host.egress_decisions&host_id=${host.hostId}`,
    );
    assert.ok(
      events.body.events.some(
        (event: { level: string; data: { uncounted: number } }) =>
          event.level === 'warn' && event.data.uncounted > 0,
      ),
      'a warning names the uncounted',
    );
    const metrics = (await lab.t.request('GET', '/metrics')).body as string;
    assert.match(metrics, /ccp_egress_policy_decisions_total\{decision="would_block"\} \d+/);
  });
});

describe('what the egress policy blocked, enforced', {
  skip: needs('lab', 'docker'),
  timeout: 600_000,
}, () => {
  let host: Awaited<ReturnType<typeof policyHost>>;
  let web: { name: string; address: string; httpUrl: string };

  before(async () => {
    web = (await ensureLab()).public.web;
    host = await policyHost({
      mode: 'enforce',
      default_action: 'allow',
      rules: [{ action: 'deny', domain: web.name }],
    });
  });
  after(() => host?.lab.close());

  it('refuses the denied name and records the attempt as blocked', async () => {
    const { lab, curl, decisions, countOf } = host;
    // By name: refused at DNS (its refusal is recorded on port 53); by its address with the name as Host:
    // refused when it connects.
    assert.match(await curl(`${web.httpUrl}/ip`), /^failed/, 'the denied name is refused');
    assert.match(
      await curl('--resolve', `${web.name}:80:${web.address}`, `${web.httpUrl}/ip`),
      /^failed/,
      'the denied name is refused by its Host at its address',
    );
    await lab.t.gateway.egressDecisionLog.read();
    const read = await decisions();
    assert.equal(countOf(read, web.name, 53)?.decision, 'blocked', JSON.stringify(read.destinations));
    assert.ok((countOf(read, web.name, 53)?.count ?? 0) >= 1, 'the DNS refusal is counted');
    assert.equal(countOf(read, web.name, 80)?.decision, 'blocked', JSON.stringify(read.destinations));
    assert.equal(countOf(read, web.name, 80)?.count, 1);
    assert.deepEqual(read.allow_list.rules, [], 'only what log-only let through becomes an allow rule');
  });
});
