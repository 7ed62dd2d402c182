/**
 * Attack (issue 25, another account of the gateway's machine -> users' laptop folders): the gateway mounts a
 * ccp user's laptop folder with sshfs under its mounts tree, `allow_other` so that the workspace's user can
 * use it. Any local account could walk that tree and read and write the folder. Now the tree is open to root
 * and the mount user only, and the kernel checks each file's mode (`default_permissions`): the other account
 * can neither list nor read the folder, while the workspace's user still reads and writes it through its
 * view of the host's folder (what the container's bind mount gives it).
 *
 * The laptop side is OpenSSH's sftp-server serving a folder here; the mount is made by FolderMounts as the
 * gateway makes it, run as a mount user this test creates, with a second unprivileged account as the attacker.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFile, execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Duplex, PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import pino from 'pino';
import type { ServerChannel } from 'ssh2';
import { needs } from '../../../../test/support/needs.js';
import type { BackgroundEvents } from '../../src/events/background-events.js';
import { makeTraversableDir } from '../../src/runtime/handed-over-files.js';
import type { WorkspaceRuntime } from '../../src/runtime/workspace-runtime.js';
import { FolderMounts } from '../../src/ssh/folder-mounts.js';

const SFTP_SERVER = '/usr/lib/openssh/sftp-server';
const run = promisify(execFile);
/** The workspace user's uid, as the files in the mount show it. */
const WORKSPACE_UID = 4242;

/**
 * Runs `command` as `uid` (with `gid`, no other groups); its exit code and output. Never synchronously: this
 * process answers the mount's SFTP, and a blocked event loop would hang every access to it.
 */
async function runAs(uid: number, gid: number, command: string): Promise<{ code: number; out: string }> {
  const args = [`--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', 'sh', '-c', command];
  return run('setpriv', args, { timeout: 10_000 }).then(
    ({ stdout, stderr }) => ({ code: 0, out: `${stdout}${stderr}` }),
    (error: { code?: number; stdout?: string; stderr?: string }) => ({
      code: typeof error.code === 'number' ? error.code : -1,
      out: `${error.stdout ?? ''}${error.stderr ?? ''}`,
    }),
  );
}

/** A new system account without home or shell (removed by `after`); its uid and gid. */
function account(name: string): { uid: number; gid: number } {
  execFileSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', name]);
  const id = (flag: string) => Number(execFileSync('id', [flag, name], { encoding: 'utf8' }));
  return { uid: id('-u'), gid: id('-g') };
}

/**
 * The client's end of the mount channel as FolderMounts sees it: the request line, then SFTP answered by
 * OpenSSH's sftp-server (what sshfs writes to the channel goes to it).
 */
function clientChannel(request: object): {
  channel: ServerChannel;
  said: () => string;
  server: ChildProcess;
} {
  const server = spawn(SFTP_SERVER, ['-e'], { stdio: ['pipe', 'pipe', 'ignore'] });
  const channel = new Duplex({
    read() {},
    write(chunk, _encoding, done) {
      server.stdin?.write(chunk, done);
    },
  });
  channel.push(`${JSON.stringify(request)}\n`);
  server.stdout?.on('data', (chunk: Buffer) => channel.push(chunk));
  let said = '';
  const stderr = new PassThrough();
  stderr.on('data', (chunk: Buffer) => {
    said += chunk.toString();
  });
  Object.assign(channel, { stderr, exit: () => {} });
  return { channel: channel as unknown as ServerChannel, said: () => said, server };
}

describe('attack: another account of the gateway machine reads a mounted laptop folder', {
  skip: needs('root', 'fuse') || (spawnSync('which', ['useradd']).status !== 0 && 'needs useradd'),
  timeout: 60_000,
}, () => {
  const suffix = process.pid.toString(36);
  const mountUserName = `ccpmnt${suffix}`;
  const otherName = `ccpother${suffix}`;
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-mount-tree-'));
  const laptop = path.join(work, 'laptop project');
  const mountsRoot = path.join(work, 'mounts', 'gateway-1');
  const hostDir = path.join(mountsRoot, 'host-1');
  // The workspace's view of its host's folder (the container's bind mount), in a folder only it can walk.
  const workspaceSide = path.join(work, 'workspace');
  const view = path.join(workspaceSide, 'run-ccp-mounts');
  let other: { uid: number; gid: number };
  let mounts: FolderMounts;
  let server: ChildProcess | undefined;

  before(async () => {
    chmodSync(work, 0o755);
    account(mountUserName);
    other = account(otherName);
    mkdirSync(laptop);
    writeFileSync(path.join(laptop, 'notes.txt'), 'the user’s notes\n');
    // As the gateway prepares a host's folder for mounts (host-provisioning.ts).
    await makeTraversableDir(hostDir);
    mkdirSync(view, { recursive: true });
    chownSync(workspaceSide, WORKSPACE_UID, WORKSPACE_UID);
    chmodSync(workspaceSide, 0o700);
    mounts = new FolderMounts({
      runtime: {
        folderMountDir: async () => hostDir,
        exec: async () => ({ exitCode: 0, stdout: '/run/ccp-mounts/x\n', stderr: '' }),
      } as unknown as WorkspaceRuntime,
      events: { emit: async () => {} } as unknown as BackgroundEvents,
      user: mountUserName,
      workspaceUid: WORKSPACE_UID,
      log: pino({ level: 'silent' }),
      readyMs: 10_000,
    });
  });

  after(async () => {
    await mounts?.closeAll();
    spawnSync('umount', ['-l', view]);
    server?.kill();
    spawnSync('userdel', [otherName]);
    spawnSync('userdel', [mountUserName]);
    rmSync(work, { recursive: true, force: true });
  });

  it('keeps the other account out, and the workspace user in', async () => {
    const client = clientChannel({ path: laptop, layout: 'link' });
    server = client.server;
    mounts.handle(client.channel, {
      hostId: 'host-1',
      shortId: 'abcdefgh',
      linuxUser: 'ana',
      user: { id: 'u1', username: 'ana' },
      actor: { kind: 'user', id: 'u1', username: 'ana' },
      clientAddress: '127.0.0.1',
      traffic: { toWorkspace: 0, toClient: 0 },
      remoteNode: null,
    });
    for (let i = 0; i < 200 && !client.said().includes('\n'); i++)
      await new Promise((resolve) => setTimeout(resolve, 50));
    assert.match(client.said(), /^mounted /);
    const [mountId = ''] = await readdir(hostDir);
    const mountPoint = path.join(hostDir, mountId);
    assert.equal(await readFile(path.join(mountPoint, 'notes.txt'), 'utf8'), 'the user’s notes\n');

    const q = (at: string) => `'${at.replace(/'/g, `'\\''`)}'`;
    const listed = await runAs(other.uid, other.gid, `ls ${q(mountPoint)}`);
    assert.notEqual(listed.code, 0, `the other account listed the folder: ${listed.out}`);
    const read = await runAs(other.uid, other.gid, `cat ${q(path.join(mountPoint, 'notes.txt'))}`);
    assert.notEqual(read.code, 0, `the other account read a file: ${read.out}`);
    const wrote = await runAs(
      other.uid,
      other.gid,
      `echo planted > ${q(path.join(mountPoint, 'planted.txt'))}`,
    );
    assert.notEqual(wrote.code, 0, 'the other account wrote a file');

    // The workspace's user, through the bind of its host's folder, reads and writes as before.
    await run('mount', ['--rbind', hostDir, view]);
    const inView = path.join(view, mountId);
    const own = await runAs(
      WORKSPACE_UID,
      WORKSPACE_UID,
      `cat ${q(path.join(inView, 'notes.txt'))} && echo 'from the workspace' > ${q(path.join(inView, 'new.txt'))}`,
    );
    assert.equal(own.code, 0, own.out);
    assert.equal(own.out, 'the user’s notes\n');
    assert.equal(await readFile(path.join(laptop, 'new.txt'), 'utf8'), 'from the workspace\n');
  });
});
