/**
 * Attack (issue 25, workspace -> the user's laptop, `full` mount mode): hot sync copies the workspace's links
 * to the laptop. Root in the workspace makes `keys -> ~/.ssh` in the copy, or links that climb with `..`
 * (`up -> ..`, `d/key -> ../../.ssh/id_ed25519`), and they would appear in the user's project within one poll,
 * where the user's editor, build tools and git follow them. Neither the first copy nor a later pass makes
 * such a link on the laptop; each is named in a notice, and links that go down within the folder still sync.
 */
import assert from 'node:assert/strict';
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client, SFTPWrapper } from 'ssh2';
import { needs } from '../../../../test/support/needs.js';
import { HotSync } from '../../src/hot-sync.js';
import { KnownHosts } from '../../src/known-hosts.js';
import { connectSsh } from '../../src/ssh-connection.js';
import { linksLeadingOut } from '../helpers/links-leading-out.js';
import { startLocalSshd } from '../helpers/local-sshd.js';

describe('attack: the workspace makes links in the full-mode copy that lead out of the laptop folder', {
  skip: needs('sftp-server'),
  timeout: 60_000,
}, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-attack-hot-sync-links-'));
  // The project is a child of the home folder, as it usually is.
  const home = path.join(work, 'home');
  const local = path.join(home, 'project');
  const remote = path.join(work, 'workspace');
  const L = (rel: string) => path.join(local, rel);
  const R = (rel: string) => path.join(remote, rel);
  const keys = path.join(home, '.ssh');
  let sshd: Awaited<ReturnType<typeof startLocalSshd>>;
  let client: Client | undefined;
  let engine: HotSync | undefined;

  before(async () => {
    sshd = await startLocalSshd(process.env, undefined, true);
  });

  after(async () => {
    await engine?.stop();
    client?.end();
    sshd.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('makes none of them on the laptop, says so, and still syncs links within the folder', async () => {
    mkdirSync(keys, { recursive: true });
    writeFileSync(path.join(keys, 'id_ed25519'), 'the user’s private key\n');
    mkdirSync(L('d/sub'), { recursive: true });
    writeFileSync(L('d/sub/file'), 'mine\n');
    mkdirSync(R('d/sub'), { recursive: true });
    writeFileSync(R('d/sub/file'), 'mine\n');
    // There before the first copy...
    symlinkSync(keys, R('keys'));
    symlinkSync('..', R('up'));
    symlinkSync('../../.ssh/id_ed25519', R('d/key'));
    symlinkSync('sub/file', R('d/ok'));
    const cold = path.join(work, 'cold');
    symlinkSync(local, cold);

    client = await connectSsh(
      { host: '127.0.0.1', port: sshd.port, username: 'u', password: 'p' },
      new KnownHosts(path.join(work, 'known_hosts')),
    );
    const opened = client;
    const sftp = await new Promise<SFTPWrapper>((resolve, reject) =>
      opened.sftp((error, session) => (error ? reject(error) : resolve(session))),
    );
    const notices: string[] = [];
    engine = new HotSync({
      localRoot: local,
      remoteRoot: remote,
      coldRoot: cold,
      maxFileBytes: 1000,
      // node_modules copied, not linked to the sshfs layer (hot_sync_ignore without it), so npm's links are synced.
      ignore: ['.git'],
      pollMs: 60_000,
      onNotice: (text) => notices.push(text),
    });
    await engine.attach(sftp);
    // ...and made after it, found by the next poll.
    symlinkSync(path.join(keys, 'id_ed25519'), R('d/later'));
    symlinkSync('sub/../../../.ssh', R('d/sub-up'));
    await engine.flush();

    assert.deepEqual(linksLeadingOut(realpathSync.native(local)), []);
    for (const rel of ['keys', 'up', 'd/key', 'd/later', 'd/sub-up']) {
      assert.throws(() => lstatSync(L(rel)), /ENOENT/, `${rel} was made on the laptop`);
      assert.ok(
        notices.some((text) => text.startsWith(`${rel} in the workspace: a link made from the workspace`)),
        `no notice about ${rel}:\n${notices.join('\n')}`,
      );
    }
    assert.equal(readlinkSync(L('d/ok')), 'sub/file');
  });
  it("makes npm's and pnpm's node_modules links on the laptop, and none that climb out, also after a folder moved up", async () => {
    assert.ok(engine, 'the first case attached hot sync');
    const files: Record<string, string> = {
      'node_modules/pkg/bin/x.js': 'x\n',
      'node_modules/@scope/p/bin/y.js': 'y\n',
      'node_modules/.pnpm/a@1/node_modules/a/index.js': 'a\n',
      'node_modules/.pnpm/b@2/node_modules/b/index.js': 'b\n',
      'a/x': 'ax\n',
    };
    for (const [rel, text] of Object.entries(files)) {
      mkdirSync(path.dirname(R(rel)), { recursive: true });
      writeFileSync(R(rel), text);
    }
    mkdirSync(R('node_modules/.bin'));
    mkdirSync(R('a/b/.bin'), { recursive: true });
    const allowed: Record<string, string> = {
      'node_modules/.bin/x': '../pkg/bin/x.js',
      'node_modules/.bin/y': '../@scope/p/bin/y.js',
      'node_modules/a': '.pnpm/a@1/node_modules/a',
      'node_modules/.pnpm/a@1/node_modules/b': '../../b@2/node_modules/b',
      // a/b/.bin is 3 deep: ../../x is a/x.
      'a/b/.bin/k': '../../x',
    };
    const refusedLinks: Record<string, string> = {
      'node_modules/.bin/far': '../../../.ssh',
      'd/after-name': 'a/../../x',
      'd/dot': './x/../..',
    };
    for (const [rel, target] of Object.entries({ ...allowed, ...refusedLinks })) symlinkSync(target, R(rel));
    await engine?.flush();

    for (const [rel, target] of Object.entries(allowed)) assert.equal(readlinkSync(L(rel)), target, rel);
    const reads = {
      'node_modules/.bin/x': 'x\n',
      'node_modules/.bin/y': 'y\n',
      'node_modules/a/index.js': 'a\n',
      'node_modules/.pnpm/a@1/node_modules/b/index.js': 'b\n',
      'a/b/.bin/k': 'ax\n',
    };
    for (const [rel, text] of Object.entries(reads)) assert.equal(readFileSync(L(rel), 'utf8'), text, rel);
    for (const rel of Object.keys(refusedLinks))
      assert.throws(() => lstatSync(L(rel)), /ENOENT/, `${rel} was made on the laptop`);

    // The folder moved up in the workspace: hot sync sees .bin/k as a new link, 1 deep, climbing 2.
    renameSync(R('a/b/.bin'), R('.bin'));
    await engine?.flush();
    assert.throws(() => lstatSync(L('.bin/k')), /ENOENT/, '.bin/k was made on the laptop');
    assert.deepEqual(linksLeadingOut(realpathSync.native(local)), []);
  });
});
