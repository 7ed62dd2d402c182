/**
 * Issue 30, policy: an enforced egress policy (here the gateway-wide EGRESS_POLICY) decides in the egress
 * gateway what a workspace reaches through its upstream, by the name it asked for (HTTP Host, TLS SNI) and by
 * address for traffic without one. Real workspace, real tunnel (the lab's VMess exit).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { ensureLab } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { type LabGateway, startLabGateway } from '../helpers/lab-gateway.js';

const exec = promisify(execFile);

describe('egress policy through a real tunnel', { skip: needs('lab', 'docker'), timeout: 600_000 }, () => {
  let lab: LabGateway;
  let hostId: string;

  /** curl in the workspace: what it printed, or its exit status when it failed. */
  const curl = async (...args: string[]) => {
    try {
      const { stdout } = await exec('docker', [
        'exec',
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

  before(async () => {
    const description = await ensureLab();
    const web = description.public.web;
    lab = await startLabGateway({
      EGRESS_POLICY: JSON.stringify({
        mode: 'enforce',
        default_action: 'allow',
        rules: [{ action: 'deny', domain: web.name }],
      }),
    });
    const user = await lab.t.createUser(`pol${randomBytes(3).toString('hex')}`);
    hostId = (await lab.createHost(user.id)).id;
    await lab.startHost(hostId);
  });
  after(() => lab?.close());

  it('a denied name is refused by HTTP Host and by TLS SNI; other destinations leave through the exit', async () => {
    const { web } = lab.lab.public;
    const exit = lab.lab.exits[0]!.address;
    assert.equal(await curl(`${lab.lab.internet.httpUrl}/ip`), exit, 'an allowed destination');
    assert.match(await curl(`${web.httpUrl}/ip`), /^failed/, 'the denied name over HTTP');
    assert.match(await curl('-k', `${web.httpsUrl}/ip`), /^failed/, 'the denied name over HTTPS');
    // The same site by its address alone carries no name: only an address rule could stop it.
    assert.equal(await curl(`http://${web.address}/ip`), exit, 'the address without a name');
  });
});
