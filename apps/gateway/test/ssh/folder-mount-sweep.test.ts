import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import pino from 'pino';
import { needs } from '../../../../test/support/needs.js';
import { mountsUnder } from '../../src/runtime/folder-mount-points.js';
import { FolderMounts } from '../../src/ssh/folder-mounts.js';

// A real mount (tmpfs) stands for one a previous run left: making it needs root.
describe('folder mounts: what a gateway leaves behind', { skip: needs('root') }, () => {
  it('unmounts and removes, at start-up, the mounts a previous run left under its directory', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'ccp-sweep-'));
    const point = path.join(root, 'host-1', 'a1b2');
    mkdirSync(point, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'ccp-sweep-test', point]);
    try {
      assert.deepEqual(mountsUnder(root), [point]);
      await FolderMounts.sweep(root, pino({ level: 'silent' }));
      assert.deepEqual(mountsUnder(root), []);
      assert.equal(existsSync(point), false);
      assert.equal(existsSync(path.join(root, 'host-1')), true, 'only mount points are removed');
    } finally {
      spawnSync('umount', ['-l', point]);
      rmSync(root, { recursive: true, force: true });
    }
  });
});
