import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import type { RecordedEvent } from '@ccp/api';
import pino from 'pino';
import type { ServerChannel } from 'ssh2';
import type { BackgroundEvents } from '../../src/events/background-events.js';
import { mountsUnder, propagatesToContainers, readMountInfo } from '../../src/runtime/folder-mount-points.js';
import type { WorkspaceRuntime } from '../../src/runtime/workspace-runtime.js';
import { FolderMounts, invalidMountPath } from '../../src/ssh/folder-mounts.js';

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

describe('folder mounts: what a gateway refuses', () => {
  it('tells the client, and logs, when the workspace cannot have mounts', async () => {
    const emitted: RecordedEvent[] = [];
    const mounts = new FolderMounts({
      runtime: { folderMountDir: async () => null } as unknown as WorkspaceRuntime,
      events: {
        emit: async (input: RecordedEvent) => void emitted.push(input),
      } as unknown as BackgroundEvents,
      user: 'ccp-mount',
      workspaceUid: 1000,
      log: pino({ level: 'silent' }),
    });
    /** Sends one mount request on a stand-in channel and returns the status line the client is told. */
    const ask = async (request: { path: string; layout: string }, remoteNode: string | null = null) => {
      const channel = Object.assign(new PassThrough(), { stderr: new PassThrough(), exit: () => {} });
      let said = '';
      channel.stderr.on('data', (chunk: Buffer) => {
        said += chunk.toString();
      });
      mounts.handle(channel as unknown as ServerChannel, {
        hostId: 'h1',
        shortId: 'abcdefgh',
        linuxUser: 'ana',
        user: { id: 'u1', username: 'ana' },
        actor: { kind: 'user', id: 'u1', username: 'ana' },
        clientAddress: '127.0.0.1',
        traffic: { toWorkspace: 0, toClient: 0 },
        remoteNode,
      });
      channel.write(`${JSON.stringify(request)}\n`);
      for (let i = 0; i < 50 && !said.includes('\n'); i++) await new Promise((r) => setTimeout(r, 10));
      return said;
    };
    assert.match(
      await ask({ path: '/home/ana/project', layout: 'link' }),
      /^error this workspace has no folder mount support/,
    );
    assert.equal(emitted[0]?.type, 'ssh.mount.failed');
    assert.equal(emitted[0]?.data?.path, '/home/ana/project');
    const badSaid = await ask({ path: '/etc/cron.d', layout: 'link' });
    assert.match(badSaid, /^error \/etc\/cron\.d is a system folder of the workspace/);
    assert.match(
      await ask({ path: '/home/ana/project', layout: 'link' }, 'node-b'),
      /^error host abcdefgh runs on node node-b, and only that node's gateway mounts folders into it/,
    );
    assert.equal(emitted.at(-1)?.type, 'ssh.mount.failed');
  });
});
