import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { needs } from '../../../test/support/needs.js';
import { KnownHosts } from '../src/known-hosts.js';
import { connectSsh, execCollect } from '../src/ssh-connection.js';
import { startLocalSshd } from './helpers/local-sshd.js';
import { mountWithPassiveSshfs } from './helpers/passive-sshfs.js';

// The CLI's SFTP server against a real sshfs and FUSE on this machine: a small SSH server runs each exec
// request as a local shell command, and `sshfs -o passive` reads our SFTP from it (the gateway does the same
// with the subsystem channel; that path is tested against a real workspace in cli.test.ts).
describe('reverse sshfs: the local folder served over SFTP, mounted by sshfs -o passive', {
  skip: needs('fuse'),
  timeout: 60_000,
}, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-cli-sftp-'));
  const local = path.join(work, 'local');
  const mountpoint = path.join(work, 'mnt');
  let sshd: Awaited<ReturnType<typeof startLocalSshd>>;
  let port = 0;

  before(async () => {
    mkdirSync(local);
    mkdirSync(mountpoint);
    sshd = await startLocalSshd(process.env);
    port = sshd.port;
  });

  after(async () => {
    spawnSync('fusermount3', ['-u', '-z', mountpoint]);
    sshd.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('shows local files inside, and what is written inside lands on the local disk', async () => {
    writeFileSync(path.join(local, 'from-laptop.txt'), 'written locally\n');
    mkdirSync(path.join(local, 'sub'));
    const knownHosts = new KnownHosts(path.join(work, 'known_hosts'));
    const client = await connectSsh({ host: '127.0.0.1', port, username: 'u', password: 'p' }, knownHosts);
    try {
      const channel = await mountWithPassiveSshfs(client, local, mountpoint);
      const seen = await execCollect(client, `cat ${mountpoint}/from-laptop.txt; ls ${mountpoint}`);
      assert.equal(seen.stdout, 'written locally\nfrom-laptop.txt\nsub\n');
      const wrote = await execCollect(
        client,
        `printf 'from the workspace\\n' > ${mountpoint}/sub/inside.txt && mv ${mountpoint}/sub/inside.txt ${mountpoint}/moved.txt && mkdir ${mountpoint}/made && rm ${mountpoint}/from-laptop.txt`,
      );
      assert.equal(wrote.code, 0, wrote.stderr);
      assert.equal(readFileSync(path.join(local, 'moved.txt'), 'utf8'), 'from the workspace\n');
      assert.ok(existsSync(path.join(local, 'made')));
      assert.equal(existsSync(path.join(local, 'from-laptop.txt')), false);
      // Nothing outside the folder is served, whether the link was there or made from the workspace.
      writeFileSync(path.join(work, 'secret.txt'), 'outside\n');
      symlinkSync(path.join(work, 'secret.txt'), path.join(local, 'out'));
      symlinkSync('moved.txt', path.join(local, 'in'));
      const links = await execCollect(
        client,
        `cat ${mountpoint}/in; cat ${mountpoint}/out; ln -s ${path.join(work, 'secret.txt')} ${mountpoint}/made-link; ln -s ../secret.txt ${mountpoint}/made-up; ln -s moved.txt ${mountpoint}/made-in; cat ${mountpoint}/made-in`,
      );
      assert.equal(links.stdout, 'from the workspace\nfrom the workspace\n', links.stderr);
      assert.match(links.stderr, /out: Permission denied/);
      // Links out of the folder are never made on this machine, whether absolute or climbing out.
      assert.match(links.stderr, /made-link\S*: Permission denied/);
      assert.match(links.stderr, /made-up\S*: Permission denied/);
      assert.throws(() => lstatSync(path.join(local, 'made-link')), /ENOENT/);
      assert.throws(() => lstatSync(path.join(local, 'made-up')), /ENOENT/);
      assert.equal(readlinkSync(path.join(local, 'made-in')), 'moved.txt');
      channel.close();
    } finally {
      client.end();
    }
  });
});
