import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { mountsUnder, propagatesToContainers, readMountInfo } from '../../src/runtime/folder-mount-points.js';
import { invalidMountPath } from '../../src/ssh/folder-mounts.js';

// The mount's path comes from the client: everything else is refused before anything is made.
describe('folder mounts: which paths a client may ask for', () => {
  it('accepts absolute, normalised paths outside the system trees', () => {
    for (const ok of ['/Users/ana/src/app', '/home/dev/project', '/tmp/x', '/srv/my project', '/opt/ünïcode'])
      assert.equal(invalidMountPath(ok), null, ok);
  });

  it('refuses relative, unnormalised, root and system paths with a reason', () => {
    const cases: Array<[string, RegExp]> = [
      ['project', /absolute/],
      ['/home/dev/../../etc', /normalised/],
      ['/home//dev', /normalised/],
      ['/home/dev/', /normalised/],
      ['/', /system folder/],
      ['/etc', /system folder/],
      ['/usr/local/src', /system folder/],
      ['/run/ccp-mounts/x', /system folder/],
      ['/proc/1', /system folder/],
      [`/home/${'a'.repeat(1100)}`, /too long/],
      ['/home/a\0b', /too long or not text/],
    ];
    for (const [bad, reason] of cases) assert.match(invalidMountPath(bad) ?? '', reason, bad);
  });
});

describe('folder mounts: reading the mount table', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'ccp-mountinfo-'));
  const file = path.join(dir, 'mountinfo');
  writeFileSync(
    file,
    [
      '25 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw',
      '30 25 0:26 / /run rw,nosuid shared:5 - tmpfs tmpfs rw',
      '31 25 0:27 / /private rw - tmpfs tmpfs rw',
      '40 30 0:50 / /run/ccp/mounts/h1/a\\040b rw shared:9 - fuse.sshfs :/x rw',
      '41 30 0:51 / /run/ccp/mounts/h1/a/deeper rw shared:10 - fuse.sshfs :/y rw',
      '',
    ].join('\n'),
  );

  it('decodes escaped mount points and lists those under a folder, deepest first', () => {
    const mounts = readMountInfo(file);
    assert.equal(mounts[3]?.mountPoint, '/run/ccp/mounts/h1/a b');
    assert.equal(mounts[3]?.fsType, 'fuse.sshfs');
    assert.deepEqual(mountsUnder('/run/ccp/mounts/h1', mounts), [
      '/run/ccp/mounts/h1/a/deeper',
      '/run/ccp/mounts/h1/a b',
    ]);
    assert.deepEqual(mountsUnder('/run/ccp/mounts/h2', mounts), []);
  });

  it('tells whether mounts under a folder reach containers (its holding mount is shared)', () => {
    const mounts = readMountInfo(file);
    assert.equal(propagatesToContainers('/run/ccp/mounts/h1', mounts), true);
    assert.equal(propagatesToContainers('/private/mounts', mounts), false);
    rmSync(dir, { recursive: true, force: true });
  });
});
