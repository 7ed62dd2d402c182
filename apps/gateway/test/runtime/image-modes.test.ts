import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { needs } from '../../../../test/support/needs.js';
import { REPO_ROOT } from '../helpers/gateway-process.js';

const exec = promisify(execFile);

/**
 * The image's files get the modes it needs, not the checkout's: a clone made under umask 002 (the default of
 * many distributions' users) built an image whose /etc and /etc/ssh were group-writable, and the workspace's
 * sshd then refused every login, the gateway's included ("bad ownership or modes for directory /etc/ssh").
 */
describe('the workspace image built from a group-writable checkout', {
  skip: needs('docker'),
  timeout: 20 * 60_000,
}, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-image-modes-'));
  after(() => rmSync(work, { recursive: true, force: true }));

  it('has the modes sshd and the workspace user need', async () => {
    const clone = path.join(work, 'clone');
    const asUmask002 = (command: string, cwd = work) =>
      exec('sh', ['-c', `umask 002 && ${command}`], { cwd, maxBuffer: 64 * 1024 * 1024 });
    await asUmask002(`git clone --quiet '${REPO_ROOT}' clone`);
    const overlay = path.join(clone, 'image/workspace/rootfs/etc/ssh');
    assert.equal(statSync(overlay).mode & 0o777, 0o775, 'the checkout itself is group-writable');

    // --rebuild: the tag hashes contents, not modes, so the suite's own image would otherwise be taken as it is.
    const { stdout } = await asUmask002('bash image/build.sh --variant test --rebuild workspace', clone);
    const tag = /^image workspace=(\S+)$/m.exec(stdout)?.[1];
    assert.ok(tag, stdout);
    const files = ['/etc', '/etc/ssh', '/etc/ssh/sshd_config', '/usr/local/sbin/ccp-workspace-entrypoint'];
    const modes = await exec('docker', ['run', '--rm', '--entrypoint', 'stat', tag, '-c', '%a %n', ...files]);
    assert.deepEqual(modes.stdout.trim().split('\n'), [
      '755 /etc',
      '755 /etc/ssh',
      '644 /etc/ssh/sshd_config',
      '755 /usr/local/sbin/ccp-workspace-entrypoint',
    ]);
  });
});
