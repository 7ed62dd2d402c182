import assert from 'node:assert/strict';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client, SFTPWrapper } from 'ssh2';
import { needs } from '../../../test/support/needs.js';
import { HotSync, type HotSyncOptions } from '../src/hot-sync.js';
import { KnownHosts } from '../src/known-hosts.js';
import { connectSsh } from '../src/ssh-connection.js';
import { startLocalSshd } from './helpers/local-sshd.js';

// The workspace side is a directory on this machine reached through a real SSH connection and OpenSSH's
// sftp-server. The "cold" sshfs layer is stood in for by a link to the local folder, which is what the
// workspace sees through sshfs.
const LIMIT = 1000;

async function waitFor(what: string, check: () => boolean, ms = 5000): Promise<void> {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('hot sync: a two-way copy of small files, links to sshfs for the rest', {
  skip: needs('sftp-server'),
  timeout: 120_000,
}, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-hot-sync-'));
  let sshd: Awaited<ReturnType<typeof startLocalSshd>>;
  const clients: Client[] = [];
  const engines: HotSync[] = [];
  let n = 0;

  const openSftp = async (): Promise<{ client: Client; sftp: SFTPWrapper }> => {
    const knownHosts = new KnownHosts(path.join(work, 'known_hosts'));
    const client = await connectSsh(
      { host: '127.0.0.1', port: sshd.port, username: 'u', password: 'p' },
      knownHosts,
    );
    clients.push(client);
    const sftp = await new Promise<SFTPWrapper>((resolve, reject) =>
      client.sftp((error, opened) => (error ? reject(error) : resolve(opened))),
    );
    return { client, sftp };
  };

  /** A fresh local folder, workspace folder and cold link, and an engine on them (not attached yet). */
  const setup = (extra: Partial<HotSyncOptions> = {}) => {
    const root = path.join(work, `case-${++n}`);
    const local = path.join(root, 'local folder ü');
    const remote = path.join(root, 'workspace');
    const cold = path.join(root, 'cold');
    mkdirSync(local, { recursive: true });
    mkdirSync(remote);
    symlinkSync(local, cold);
    const conflicts: Array<[string, string]> = [];
    const notices: string[] = [];
    const L = (rel: string) => path.join(local, rel);
    const R = (rel: string) => path.join(remote, rel);
    /** An engine on these folders; called again, the next run of ccp (the earlier one stopped first). */
    const rerun = () => {
      const next = new HotSync({
        localRoot: local,
        remoteRoot: remote,
        coldRoot: cold,
        maxFileBytes: LIMIT,
        pollMs: 60_000,
        onConflict: (rel, keptAs) => conflicts.push([rel, keptAs]),
        onNotice: (text) => notices.push(text),
        ...extra,
      });
      engines.push(next);
      return next;
    };
    const engine = rerun();
    return { local, remote, cold, engine, conflicts, notices, L, R, rerun };
  };

  before(async () => {
    sshd = await startLocalSshd(process.env, undefined, true);
  });

  after(async () => {
    for (const engine of engines) await engine.stop();
    for (const client of clients) client.end();
    sshd.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('initial sync: small files copied with time and mode, big files and ignored folders linked', async () => {
    const { engine, conflicts, L, R, cold } = setup();
    mkdirSync(L('sub dir'));
    writeFileSync(L('small.txt'), 'small\n', { mode: 0o640 });
    utimesSync(L('small.txt'), 1_700_000_000, 1_700_000_000);
    writeFileSync(L('sub dir/ünïcode name.txt'), 'utf-8 and spaces\n');
    writeFileSync(L('big.bin'), Buffer.alloc(LIMIT, 7));
    writeFileSync(L('just under.bin'), Buffer.alloc(LIMIT - 1, 8));
    mkdirSync(L('node_modules/pkg'), { recursive: true });
    writeFileSync(L('node_modules/pkg/index.js'), 'module.exports = 1;\n');
    mkdirSync(L('.git'));
    symlinkSync('small.txt', L('alias'));
    // The workspace folder was used before: one file only there, one the same, two that differ.
    writeFileSync(R('made in workspace.txt'), 'from the workspace\n');
    writeFileSync(L('same.txt'), 'same\n');
    writeFileSync(R('same.txt'), 'same\n');
    writeFileSync(L('differ.txt'), 'local version\n');
    writeFileSync(R('differ.txt'), 'remote version, longer\n');
    writeFileSync(L('same size.txt'), 'aaaa\n');
    writeFileSync(R('same size.txt'), 'bbbb\n');

    const { sftp } = await openSftp();
    const summary = await engine.attach(sftp);

    assert.equal(readFileSync(R('small.txt'), 'utf8'), 'small\n');
    assert.equal(statSync(R('small.txt')).mtimeMs, 1_700_000_000_000);
    assert.equal(statSync(R('small.txt')).mode & 0o777, 0o640);
    assert.equal(readFileSync(R('sub dir/ünïcode name.txt'), 'utf8'), 'utf-8 and spaces\n');
    assert.ok(lstatSync(R('just under.bin')).isFile());
    assert.equal(readlinkSync(R('big.bin')), path.join(cold, 'big.bin'));
    assert.deepEqual(readFileSync(R('big.bin')), Buffer.alloc(LIMIT, 7));
    assert.equal(readlinkSync(R('node_modules')), path.join(cold, 'node_modules'));
    assert.equal(readFileSync(R('node_modules/pkg/index.js'), 'utf8'), 'module.exports = 1;\n');
    assert.equal(readlinkSync(R('.git')), path.join(cold, '.git'));
    assert.equal(readlinkSync(R('alias')), 'small.txt');
    assert.equal(readFileSync(L('made in workspace.txt'), 'utf8'), 'from the workspace\n');
    assert.equal(readFileSync(L('same.txt'), 'utf8'), 'same\n');
    // Differing content on both sides with no history: the local file wins, the workspace's is kept beside it.
    assert.equal(conflicts.length, 2);
    for (const [rel, local, remote] of [
      ['differ.txt', 'local version\n', 'remote version, longer\n'],
      ['same size.txt', 'aaaa\n', 'bbbb\n'],
    ] as const) {
      const keptAs = conflicts.find(([c]) => c === rel)?.[1] ?? '';
      assert.match(keptAs, /\.ccp-conflict-\d{8}T\d{6}Z$/);
      assert.equal(readFileSync(L(rel), 'utf8'), local);
      assert.equal(readFileSync(R(rel), 'utf8'), local);
      assert.equal(readFileSync(L(keptAs), 'utf8'), remote);
      assert.equal(readFileSync(R(keptAs), 'utf8'), remote);
    }
    assert.equal(summary.conflicts, 2);
    assert.equal(summary.filesLinked, 1);
    assert.equal(summary.dirsLinked, 2);
    assert.deepEqual(summary.oversized, [{ path: 'big.bin', size: LIMIT }]);
    assert.ok(summary.filesCopied >= 7, `copied ${summary.filesCopied}`);
    // No temporary files are left behind on either side.
    assert.deepEqual(
      readdirSync(R('.')).filter((name) => name.startsWith('.ccp-tmp-')),
      [],
    );
    const again = await engine.attach(sftp);
    assert.equal(again.filesCopied, 0);
    assert.equal(again.conflicts, 0);
  });

  it('local edits, creations and deletions reach the workspace; workspace changes reach this machine', async () => {
    const { engine, conflicts, L, R } = setup();
    writeFileSync(L('edit.txt'), 'v1\n');
    writeFileSync(L('delete.txt'), 'doomed\n');
    writeFileSync(L('remote edit.txt'), 'v1\n');
    writeFileSync(L('remote delete.txt'), 'doomed\n');
    mkdirSync(L('gone dir/deeper'), { recursive: true });
    writeFileSync(L('gone dir/deeper/f.txt'), 'f\n');
    const { sftp } = await openSftp();
    await engine.attach(sftp);

    writeFileSync(L('edit.txt'), 'v2, longer\n');
    unlinkSync(L('delete.txt'));
    mkdirSync(L('new dir'));
    writeFileSync(L('new dir/new.txt'), 'new\n');
    writeFileSync(R('remote edit.txt'), 'v2 from the workspace\n');
    unlinkSync(R('remote delete.txt'));
    mkdirSync(R('remote dir'));
    writeFileSync(R('remote dir/r.txt'), 'r\n');
    writeFileSync(R('remote big.bin'), Buffer.alloc(LIMIT * 3, 1));
    rmSync(R('gone dir'), { recursive: true });
    await engine.flush();

    assert.equal(readFileSync(R('edit.txt'), 'utf8'), 'v2, longer\n');
    assert.equal(existsSync(R('delete.txt')), false);
    assert.equal(readFileSync(R('new dir/new.txt'), 'utf8'), 'new\n');
    assert.equal(readFileSync(L('remote edit.txt'), 'utf8'), 'v2 from the workspace\n');
    assert.equal(
      statSync(L('remote edit.txt')).mtimeMs,
      Math.floor(statSync(R('remote edit.txt')).mtimeMs / 1000) * 1000,
    );
    assert.equal(existsSync(L('remote delete.txt')), false);
    assert.equal(readFileSync(L('remote dir/r.txt'), 'utf8'), 'r\n');
    assert.equal(existsSync(L('gone dir')), false);
    // A big file made in the workspace is downloaded, then served from here through the sshfs layer.
    assert.deepEqual(readFileSync(L('remote big.bin')), Buffer.alloc(LIMIT * 3, 1));
    assert.ok(lstatSync(R('remote big.bin')).isSymbolicLink());
    assert.deepEqual(readFileSync(R('remote big.bin')), Buffer.alloc(LIMIT * 3, 1));
    assert.deepEqual(conflicts, []);
  });

  it('a file changed on both sides keeps both versions; a workspace deletion does not remove a local edit', async () => {
    const { engine, conflicts, L, R } = setup();
    writeFileSync(L('both.txt'), 'base\n');
    writeFileSync(L('kept.txt'), 'base\n');
    writeFileSync(L('restored.txt'), 'base\n');
    mkdirSync(L('folder'));
    writeFileSync(L('folder/inner.txt'), 'base\n');
    writeFileSync(L('folder/other.txt'), 'base\n');
    const { sftp } = await openSftp();
    await engine.attach(sftp);

    writeFileSync(L('both.txt'), 'edited here\n');
    writeFileSync(R('both.txt'), 'edited in the workspace\n');
    writeFileSync(L('kept.txt'), 'edited here\n');
    unlinkSync(R('kept.txt'));
    unlinkSync(L('restored.txt'));
    writeFileSync(R('restored.txt'), 'edited in the workspace\n');
    // The folder removed in the workspace while a file in it was edited here: that file and its folder stay.
    rmSync(R('folder'), { recursive: true });
    writeFileSync(L('folder/inner.txt'), 'edited here\n');
    await engine.flush();

    assert.equal(conflicts.length, 1);
    const [rel, keptAs] = conflicts[0] ?? ['', ''];
    assert.equal(rel, 'both.txt');
    assert.equal(readFileSync(L('both.txt'), 'utf8'), 'edited here\n');
    assert.equal(readFileSync(R('both.txt'), 'utf8'), 'edited here\n');
    assert.equal(readFileSync(L(keptAs), 'utf8'), 'edited in the workspace\n');
    assert.equal(readFileSync(R(keptAs), 'utf8'), 'edited in the workspace\n');
    assert.equal(readFileSync(L('kept.txt'), 'utf8'), 'edited here\n');
    assert.equal(readFileSync(R('kept.txt'), 'utf8'), 'edited here\n');
    assert.equal(readFileSync(L('restored.txt'), 'utf8'), 'edited in the workspace\n');
    assert.equal(readFileSync(L('folder/inner.txt'), 'utf8'), 'edited here\n');
    assert.equal(readFileSync(R('folder/inner.txt'), 'utf8'), 'edited here\n');
    assert.equal(existsSync(L('folder/other.txt')), false);
    await engine.flush();
    assert.deepEqual(readdirSync(L('folder')), ['inner.txt']);
    assert.deepEqual(readdirSync(R('folder')), ['inner.txt']);
  });

  it('removes temporary files left by an interrupted transfer once they are old', async () => {
    const { engine, L, R } = setup();
    const { sftp } = await openSftp();
    await engine.attach(sftp);
    for (const where of [L('.ccp-tmp-0123456789ab'), R('.ccp-tmp-ba9876543210')]) {
      writeFileSync(where, 'partial');
      utimesSync(where, 1_700_000_000, 1_700_000_000);
    }
    writeFileSync(L('.ccp-tmp-fresh'), 'in flight');
    writeFileSync(R('.ccp-tmp-fresh'), 'in flight');
    await engine.flush();
    assert.deepEqual(readdirSync(L('.')), ['.ccp-tmp-fresh']);
    assert.deepEqual(readdirSync(R('.')), ['.ccp-tmp-fresh']);
  });

  it('a poll that finds most files gone in the workspace deletes nothing locally', async () => {
    const { engine, notices, L, R, rerun } = setup({ historyFile: path.join(work, 'history', 'guard.json') });
    for (let i = 0; i < 12; i++) writeFileSync(L(`f${i}.txt`), `${i}\n`);
    const { sftp } = await openSftp();
    await engine.attach(sftp);
    for (let i = 0; i < 7; i++) unlinkSync(R(`f${i}.txt`));
    await engine.flush();
    for (let i = 0; i < 12; i++) assert.equal(readFileSync(L(`f${i}.txt`), 'utf8'), `${i}\n`);
    assert.ok(
      notices.some((text) => /7 of 12 synced files disappeared/.test(text)),
      notices.join('\n'),
    );
    // Deletions stay paused; edits still flow.
    unlinkSync(R('f8.txt'));
    writeFileSync(R('f9.txt'), 'still synced\n');
    await engine.flush();
    assert.ok(existsSync(L('f8.txt')));
    assert.equal(readFileSync(L('f9.txt'), 'utf8'), 'still synced\n');
    // The next run copies the files still here back to the workspace: the history it reads leaves out the
    // paths whose deletion was held.
    await engine.stop();
    await rerun().attach((await openSftp()).sftp);
    for (let i = 0; i < 12; i++)
      assert.equal(readFileSync(R(`f${i}.txt`), 'utf8'), i === 9 ? 'still synced\n' : `${i}\n`);
  });

  it('files whose deletion was held back are copied to the workspace again by the next run', async () => {
    const { engine, L, R, rerun } = setup({ historyFile: path.join(work, 'history', 'held.json') });
    for (let i = 0; i < 12; i++) writeFileSync(L(`f${i}.txt`), `${i}\n`);
    await engine.attach((await openSftp()).sftp);
    for (let i = 0; i < 7; i++) unlinkSync(R(`f${i}.txt`));
    await engine.flush();
    await engine.stop();
    await rerun().attach((await openSftp()).sftp);
    for (let i = 0; i < 12; i++) assert.equal(readFileSync(R(`f${i}.txt`), 'utf8'), `${i}\n`);
  });

  it('a small file growing over the limit becomes a link, and a copy again when it shrinks', async () => {
    const { engine, L, R, cold } = setup();
    writeFileSync(L('grows.log'), 'short\n');
    const { sftp } = await openSftp();
    await engine.attach(sftp);
    assert.ok(lstatSync(R('grows.log')).isFile());
    writeFileSync(L('grows.log'), Buffer.alloc(LIMIT + 10, 65));
    await engine.flush();
    assert.equal(readlinkSync(R('grows.log')), path.join(cold, 'grows.log'));
    assert.equal(readFileSync(R('grows.log')).length, LIMIT + 10);
    // Written in the workspace through the link, it changes the local file and stays a link.
    writeFileSync(R('grows.log'), Buffer.alloc(LIMIT + 20, 66));
    await engine.flush();
    assert.ok(lstatSync(R('grows.log')).isSymbolicLink());
    assert.equal(readFileSync(L('grows.log')).length, LIMIT + 20);
    writeFileSync(L('grows.log'), 'short again\n');
    await engine.flush();
    assert.ok(lstatSync(R('grows.log')).isFile());
    assert.equal(readFileSync(R('grows.log'), 'utf8'), 'short again\n');
  });

  it('a big file moved in the workspace (its link renamed) is moved here too, not lost', async () => {
    const { engine, L, R, cold } = setup();
    writeFileSync(L('big.bin'), Buffer.alloc(LIMIT * 2, 3));
    mkdirSync(L('archive'));
    const { sftp } = await openSftp();
    await engine.attach(sftp);
    renameSync(R('big.bin'), R('archive/renamed.bin'));
    await engine.flush();
    assert.equal(existsSync(L('big.bin')), false);
    assert.deepEqual(readFileSync(L('archive/renamed.bin')), Buffer.alloc(LIMIT * 2, 3));
    assert.equal(readlinkSync(R('archive/renamed.bin')), path.join(cold, 'archive/renamed.bin'));
    assert.deepEqual(readFileSync(R('archive/renamed.bin')), Buffer.alloc(LIMIT * 2, 3));
  });

  it('survives a reconnect: changes made meanwhile on both sides are reconciled', async () => {
    const { engine, conflicts, L, R } = setup();
    for (const name of ['a.txt', 'b.txt', 'c.txt', 'd.txt']) writeFileSync(L(name), `${name} v1\n`);
    const first = await openSftp();
    await engine.attach(first.sftp);

    first.client.end();
    await waitFor('the engine to notice the closed link', () => !engine.attached);
    writeFileSync(L('a.txt'), 'a.txt changed here while away\n');
    writeFileSync(L('new here.txt'), 'new here\n');
    unlinkSync(L('c.txt'));
    writeFileSync(R('b.txt'), 'b.txt changed in the workspace while away\n');
    writeFileSync(R('new there.txt'), 'new there\n');
    unlinkSync(R('d.txt'));
    await new Promise((resolve) => setTimeout(resolve, 300));
    // Nothing moved while detached.
    assert.equal(existsSync(R('new here.txt')), false);

    const second = await openSftp();
    const summary = await engine.attach(second.sftp);
    assert.equal(readFileSync(R('a.txt'), 'utf8'), 'a.txt changed here while away\n');
    assert.equal(readFileSync(R('new here.txt'), 'utf8'), 'new here\n');
    assert.equal(existsSync(R('c.txt')), false);
    assert.equal(readFileSync(L('b.txt'), 'utf8'), 'b.txt changed in the workspace while away\n');
    assert.equal(readFileSync(L('new there.txt'), 'utf8'), 'new there\n');
    assert.equal(existsSync(L('d.txt')), false);
    assert.equal(summary.filesCopied, 4);
    assert.deepEqual(conflicts, []);
  });

  it('remembers what was synced across runs: deletions made while ccp was not running are carried out', async () => {
    const historyFile = path.join(work, 'history', 'across-runs.json');
    const { engine, conflicts, L, R, rerun } = setup({ historyFile });
    for (const name of ['a.txt', 'b.txt', 'c.txt', 'd.txt', 'e.txt']) writeFileSync(L(name), `${name} v1\n`);
    await engine.attach((await openSftp()).sftp);
    await engine.stop();
    assert.equal(statSync(historyFile).mode & 0o777, 0o600);

    unlinkSync(L('a.txt'));
    unlinkSync(R('b.txt'));
    writeFileSync(L('c.txt'), 'c.txt changed here while ccp was not running\n');
    writeFileSync(R('d.txt'), 'd.txt changed in the workspace while ccp was not running\n');
    const summary = await rerun().attach((await openSftp()).sftp);
    assert.equal(existsSync(R('a.txt')), false);
    assert.equal(existsSync(L('a.txt')), false);
    assert.equal(existsSync(L('b.txt')), false);
    assert.equal(readFileSync(R('c.txt'), 'utf8'), 'c.txt changed here while ccp was not running\n');
    assert.equal(
      readFileSync(L('d.txt'), 'utf8'),
      'd.txt changed in the workspace while ccp was not running\n',
    );
    assert.equal(readFileSync(R('e.txt'), 'utf8'), 'e.txt v1\n');
    assert.equal(summary.filesCopied, 2);
    assert.deepEqual(conflicts, []);
  });

  it('uses a history only with the workspace copy it describes', async () => {
    const historyFile = path.join(work, 'history', 'other-copy.json');
    const { engine, remote, L, R, rerun } = setup({ historyFile });
    for (const name of ['a.txt', 'b.txt']) writeFileSync(L(name), `${name} v1\n`);
    await engine.attach((await openSftp()).sftp);
    await engine.stop();

    // A copy last synced by another run (another machine, or a history that was lost): nothing is taken
    // for deleted, so the file deleted here comes back from the workspace.
    unlinkSync(`${remote}.ccp-sync-id`);
    symlinkSync('another-run', `${remote}.ccp-sync-id`);
    unlinkSync(L('a.txt'));
    const second = rerun();
    await second.attach((await openSftp()).sftp);
    await second.stop();
    assert.equal(readFileSync(L('a.txt'), 'utf8'), 'a.txt v1\n');
    assert.notEqual(readlinkSync(`${remote}.ccp-sync-id`), 'another-run');

    // An unreadable history (cut short, edited by hand) is no history: the run merges and writes a new one.
    writeFileSync(historyFile, '{"format":1,"id":');
    unlinkSync(L('a.txt'));
    const third = rerun();
    await third.attach((await openSftp()).sftp);
    await third.stop();
    assert.equal(readFileSync(L('a.txt'), 'utf8'), 'a.txt v1\n');
    assert.equal(JSON.parse(readFileSync(historyFile, 'utf8')).format, 1);

    // An emptied copy (wiped, or made again) is filled from this side, not emptied here.
    for (const name of readdirSync(remote)) rmSync(R(name));
    await rerun().attach((await openSftp()).sftp);
    assert.equal(readFileSync(L('b.txt'), 'utf8'), 'b.txt v1\n');
    assert.equal(readFileSync(R('a.txt'), 'utf8'), 'a.txt v1\n');
    assert.equal(readFileSync(R('b.txt'), 'utf8'), 'b.txt v1\n');
  });

  it('sends local changes as they happen (no poll, no flush) and polls the workspace', async () => {
    // Polling is off in effect here: only the file-system notifications can carry the local changes.
    const { engine, L, R } = setup({ pollMs: 600_000 });
    mkdirSync(L('watched'));
    const { sftp } = await openSftp();
    await engine.attach(sftp);
    writeFileSync(L('watched/later.txt'), 'seen without a flush\n');
    mkdirSync(L('watched/new/deeper'), { recursive: true });
    writeFileSync(L('watched/new/deeper/inside.txt'), 'in a new folder\n');
    await waitFor('the local file in the workspace', () => existsSync(R('watched/later.txt')));
    assert.equal(readFileSync(R('watched/later.txt'), 'utf8'), 'seen without a flush\n');
    await waitFor('the new folder in the workspace', () => existsSync(R('watched/new/deeper/inside.txt')));
    assert.equal(readFileSync(R('watched/new/deeper/inside.txt'), 'utf8'), 'in a new folder\n');
    const polled = setup({ pollMs: 300 });
    await polled.engine.attach((await openSftp()).sftp);
    writeFileSync(polled.R('polled.txt'), 'found by polling\n');
    await waitFor('the workspace file locally', () => existsSync(polled.L('polled.txt')));
    assert.equal(readFileSync(polled.L('polled.txt'), 'utf8'), 'found by polling\n');
  });

  it('leaves a name with a backslash (a path on Windows) alone on both sides, and says so', async () => {
    const { engine, notices, L, R } = setup();
    writeFileSync(L('made\\here.txt'), 'local\n');
    writeFileSync(R('made\\there.txt'), 'workspace\n');
    writeFileSync(L('plain.txt'), 'plain\n');
    await engine.attach((await openSftp()).sftp);
    await engine.flush();
    // Skipped on one side only, it would look deleted there: it stays where it is on each side.
    assert.deepEqual(readdirSync(L('.')).sort(), ['made\\here.txt', 'plain.txt']);
    assert.deepEqual(readdirSync(R('.')).sort(), ['made\\there.txt', 'plain.txt']);
    for (const name of ['made\\here.txt', 'made\\there.txt'])
      assert.ok(
        notices.some((text) => text.includes(JSON.stringify(name))),
        notices.join('\n'),
      );
  });

  it('copies links as links and never writes through them', async () => {
    const { engine, notices, L, R } = setup();
    const outside = path.join(work, `outside-${n}`);
    mkdirSync(outside);
    writeFileSync(path.join(outside, 'secret.txt'), 'outside\n');
    symlinkSync(outside, L('local link out'));
    const { sftp } = await openSftp();
    await engine.attach(sftp);
    assert.equal(readlinkSync(R('local link out')), outside);
    // The workspace's links are made here only when they lead down from their folder.
    symlinkSync(path.join(outside, 'secret.txt'), R('remote link out'));
    // Through the user's own link out: refused too, where it leads is what counts.
    symlinkSync('local link out/secret.txt', R('remote link through'));
    symlinkSync('inside.txt', R('remote link in'));
    await engine.flush();
    assert.throws(() => lstatSync(L('remote link out')), /ENOENT/);
    assert.throws(() => lstatSync(L('remote link through')), /ENOENT/);
    assert.ok(
      notices.some((text) => /remote link out.*is absolute/.test(text)),
      notices.join('\n'),
    );
    assert.ok(
      notices.some((text) => /remote link through.*leads outside the folder/.test(text)),
      notices.join('\n'),
    );
    assert.equal(readlinkSync(L('remote link in')), 'inside.txt');
    // Content under a link is not synced, and nothing was written outside.
    assert.deepEqual(readdirSync(outside), ['secret.txt']);
    assert.equal(readFileSync(path.join(outside, 'secret.txt'), 'utf8'), 'outside\n');
  });
});
