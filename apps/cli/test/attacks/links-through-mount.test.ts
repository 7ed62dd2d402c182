/**
 * Attack (issue 25, workspace -> the user's laptop, `sshfs-only` mount): root in the workspace makes links in
 * the mounted folder that the laptop's kernel resolves outside it, where the user's editor, build tools and
 * git follow them: `d/up -> ..`, then `d/key -> up/../.ssh/id_ed25519`, which reads as a path inside the
 * folder but is `~/.ssh/id_ed25519` for the kernel when the folder is a child of the home folder. And it moves
 * a link into `.git`, where links are refused. Each is refused with "Permission denied"; links that go down
 * within the folder are still made.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client } from 'ssh2';
import { needs } from '../../../../test/support/needs.js';
import { KnownHosts } from '../../src/known-hosts.js';
import { connectSsh, execCollect, shellQuote } from '../../src/ssh-connection.js';
import { startLocalSshd } from '../helpers/local-sshd.js';
import { mountWithPassiveSshfs } from '../helpers/passive-sshfs.js';

/** Every link under `dir` whose target the kernel resolves outside `root` (dangling links count as unknown). */
function linksLeadingOut(root: string, dir = root): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const at = path.join(dir, name);
    const stats = lstatSync(at);
    if (stats.isSymbolicLink()) {
      let real: string | null = null;
      try {
        real = realpathSync.native(at);
      } catch {}
      if (real !== null && real !== root && !real.startsWith(`${root}/`))
        out.push(`${path.relative(root, at)} -> ${real}`);
    } else if (stats.isDirectory()) out.push(...linksLeadingOut(root, at));
  }
  return out;
}

describe('attack: the workspace makes links on the mount that the laptop follows out of the folder', {
  skip: needs('fuse'),
  timeout: 60_000,
}, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-cli-mount-links-'));
  const home = path.join(work, 'home');
  const local = path.join(home, 'project');
  const mountpoint = path.join(work, 'mnt');
  const m = shellQuote(mountpoint);
  let sshd: Awaited<ReturnType<typeof startLocalSshd>>;
  let client: Client;

  before(async () => {
    mkdirSync(path.join(home, '.ssh'), { recursive: true });
    writeFileSync(path.join(home, '.ssh/id_ed25519'), 'the user’s private key\n');
    mkdirSync(path.join(local, '.git/refs/heads'), { recursive: true });
    mkdirSync(mountpoint);
    sshd = await startLocalSshd(process.env);
    client = await connectSsh(
      { host: '127.0.0.1', port: sshd.port, username: 'u', password: 'p' },
      new KnownHosts(path.join(work, 'known_hosts')),
    );
    await mountWithPassiveSshfs(client, local, mountpoint);
  });

  after(() => {
    spawnSync('fusermount3', ['-u', '-z', mountpoint]);
    client?.end();
    sshd?.close();
    rmSync(work, { recursive: true, force: true });
  });

  const attempt = async (what: string, command: string) => ({
    what,
    ...(await execCollect(client, command)),
  });
  const assertRefused = (result: Awaited<ReturnType<typeof attempt>>) => {
    assert.notEqual(result.code, 0, `${result.what}: went through`);
    assert.match(
      result.stderr,
      /Permission denied|Operation not permitted/,
      `${result.what}: ${result.stderr}`,
    );
  };
  const refused = async (what: string, command: string) => assertRefused(await attempt(what, command));

  it('refuses links that climb or are absolute, whatever the links before them, and makes those going down', async () => {
    const made = await execCollect(client, `mkdir ${m}/d ${m}/d/sub && printf 'mine\\n' > ${m}/d/sub/file`);
    assert.equal(made.code, 0, made.stderr);
    const attempts = [
      await attempt('up to the folder', `ln -s .. ${m}/d/up`),
      await attempt('through it to the key', `ln -s up/../.ssh/id_ed25519 ${m}/d/key`),
      await attempt('climbing and back', `ln -s sub/../../../.ssh/id_ed25519 ${m}/d/back`),
      await attempt('absolute', `ln -s ${shellQuote(path.join(home, '.ssh'))} ${m}/keys`),
    ];
    assert.deepEqual(linksLeadingOut(realpathSync.native(local)), []);
    for (const result of attempts) assertRefused(result);
    for (const name of ['d/up', 'd/key', 'd/back', 'keys'])
      assert.equal(existsSync(path.join(local, name)), false, `${name} was made on the laptop`);

    // (`ln` may say "Input/output error": with follow_symlinks sshfs asks for the new link's target's type.)
    const down = await execCollect(client, `ln -s sub/file ${m}/d/ok; cat ${m}/d/ok`);
    assert.equal(down.stdout, 'mine\n', down.stderr);
    assert.equal(readlinkSync(path.join(local, 'd/ok')), 'sub/file');
  });

  it('refuses moving a link, or a folder holding one, into .git', async () => {
    await execCollect(client, `mkdir ${m}/planted && ln -s planted ${m}/lnk && ln -s x ${m}/planted/l`);
    await refused('link into .git', `mv ${m}/lnk ${m}/.git/linked`);
    await refused('link as a ref', `mv ${m}/lnk ${m}/.git/refs/heads/main`);
    await refused('folder holding a link', `mv ${m}/planted ${m}/.git/planted`);
    assert.deepEqual(readdirSync(path.join(local, '.git')).sort(), ['refs']);
    assert.deepEqual(readdirSync(path.join(local, '.git/refs/heads')), []);
    assert.equal(readlinkSync(path.join(local, 'lnk')), 'planted');
  });
});
