import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { needs } from '../../../../test/support/needs.js';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const exec = promisify(execFile);
const skip = needs('ssh-audit');

/**
 * Hardening issue, point 7: what Debian's ssh-audit finds on the SSH proxy. It knows nothing of the strict key
 * exchange marker (its age, not a weakness: the marker is the Terrapin fix), which is the one line allowed.
 */
describe("Debian's ssh-audit against the SSH proxy", { skip }, () => {
  let t: TestGateway;
  before(async () => {
    t = await startTestGateway('sqlite');
    await t.listen();
  });
  after(() => t?.close());

  it('finds no failure and no warning, and the banner names no library or version', async () => {
    const port = String(t.gateway.ssh.port);
    // Exit status 2 for its own unknown-algorithm notice: the output is what is judged.
    const all = await exec('ssh-audit', ['-n', '-p', port, '127.0.0.1']).catch((error) => error);
    const findings = (all.stdout as string)
      .split('\n')
      .filter((line) => /-- \[(fail|warn)\]/.test(line) || /^\s+`- \[(fail|warn)\]/.test(line));
    assert.deepEqual(
      findings,
      ['(kex) kex-strict-s-v00@openssh.com   -- [warn] unknown algorithm'],
      all.stdout,
    );
    const banner = /\(gen\) banner: (.*)/.exec(all.stdout)?.[1];
    assert.equal(banner, 'SSH-2.0-cloud-cli-proxy');
  });
});
