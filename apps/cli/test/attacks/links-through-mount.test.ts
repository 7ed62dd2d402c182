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
  readFileSync,
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
import { linksLeadingOut } from '../helpers/links-leading-out.js';
import { startLocalSshd } from '../helpers/local-sshd.js';
import { mountWithPassiveSshfs } from '../helpers/passive-sshfs.js';

describe('attack: the workspace makes links on the mount that the laptop follows out of the folder', {
  skip: needs('fuse'),
  timeout: 180_000,
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
    for (const at of [mountpoint, path.join(work, 'mnt-as-gateway')])
      if (existsSync(at)) spawnSync('fusermount3', ['-u', '-z', at]);
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

  it('refuses links that climb out, climb after a name, or are absolute, and makes those that stay within', async () => {
    const made = await execCollect(
      client,
      `mkdir -p ${m}/d/sub ${m}/node_modules/.bin && printf 'mine\\n' > ${m}/d/sub/file`,
    );
    assert.equal(made.code, 0, made.stderr);
    // (`ln` may say "Input/output error": with follow_symlinks sshfs asks for the new link's target's type.)
    const toFolder = await execCollect(client, `ln -s .. ${m}/d/up; ls ${m}/d/up/d/sub`);
    assert.equal(toFolder.stdout, 'file\n', toFolder.stderr);
    const attempts = [
      await attempt('above the folder', `ln -s .. ${m}/up`),
      await attempt('through a link to the folder, to the key', `ln -s up/../.ssh/id_ed25519 ${m}/d/key`),
      await attempt('climbing and back', `ln -s sub/../../../.ssh/id_ed25519 ${m}/d/back`),
      await attempt('.. after a name', `ln -s a/../../x ${m}/d/after-name`),
      await attempt('. then ..', `ln -s ./x/../.. ${m}/d/dot`),
      await attempt('three up from two deep', `ln -s ../../../.ssh ${m}/node_modules/.bin/far`),
      await attempt('absolute', `ln -s ${shellQuote(path.join(home, '.ssh'))} ${m}/keys`),
    ];
    assert.deepEqual(linksLeadingOut(realpathSync.native(local)), []);
    for (const result of attempts) assertRefused(result);
    for (const name of ['up', 'd/key', 'd/back', 'd/after-name', 'd/dot', 'node_modules/.bin/far', 'keys'])
      assert.equal(existsSync(path.join(local, name)), false, `${name} was made on the laptop`);

    const down = await execCollect(client, `ln -s sub/file ${m}/d/ok; cat ${m}/d/ok`);
    assert.equal(down.stdout, 'mine\n', down.stderr);
    assert.equal(readlinkSync(path.join(local, 'd/ok')), 'sub/file');
  });

  it("makes npm's and pnpm's node_modules links, readable through the mount and on the laptop", async () => {
    const files: Record<string, string> = {
      'node_modules/pkg/bin/x.js': 'x\n',
      'node_modules/@scope/p/bin/y.js': 'y\n',
      'node_modules/.pnpm/a@1/node_modules/a/index.js': 'a\n',
      'node_modules/.pnpm/b@2/node_modules/b/index.js': 'b\n',
    };
    const links: Record<string, string> = {
      'node_modules/.bin/x': '../pkg/bin/x.js',
      'node_modules/.bin/y': '../@scope/p/bin/y.js',
      'node_modules/a': '.pnpm/a@1/node_modules/a',
      'node_modules/.pnpm/a@1/node_modules/b': '../../b@2/node_modules/b',
    };
    const make = [
      ...Object.entries(files).map(
        ([rel, text]) =>
          `mkdir -p ${shellQuote(path.dirname(`${mountpoint}/${rel}`))} && printf ${shellQuote(text)} > ${shellQuote(`${mountpoint}/${rel}`)}`,
      ),
      ...Object.entries(links).map(
        ([rel, target]) => `{ ln -s ${shellQuote(target)} ${shellQuote(`${mountpoint}/${rel}`)} || true; }`,
      ),
    ].join(' && ');
    const made = await execCollect(client, make);
    assert.equal(made.code, 0, made.stderr);
    const reads = {
      'node_modules/.bin/x': 'x\n',
      'node_modules/.bin/y': 'y\n',
      'node_modules/a/index.js': 'a\n',
      'node_modules/.pnpm/a@1/node_modules/b/index.js': 'b\n',
    };
    for (const [rel, text] of Object.entries(reads)) {
      const read = await execCollect(client, `cat ${shellQuote(`${mountpoint}/${rel}`)}`);
      assert.equal(read.stdout, text, `${rel} through the mount: ${read.stderr}`);
      assert.equal(readFileSync(path.join(local, rel), 'utf8'), text, `${rel} on the laptop`);
    }
    for (const [rel, target] of Object.entries(links))
      assert.equal(readlinkSync(path.join(local, rel)), target);
  });

  it('refuses moving a folder of climbing links, or such a link, up to where they would climb out', async () => {
    // a/b/.bin is 3 deep: ../../x is a/x.
    const made = await execCollect(
      client,
      `mkdir -p ${m}/a/b/.bin ${m}/a/b/plain && printf 'ax\\n' > ${m}/a/x && printf 'top x\\n' > ${m}/x && printf 'p\\n' > ${m}/a/b/plain/f` +
        ` && { ln -s ../../x ${m}/a/b/.bin/k || true; } && { ln -s f ${m}/a/b/plain/l || true; } && cat ${m}/a/b/.bin/k`,
    );
    assert.equal(made.stdout, 'ax\n', made.stderr);
    assert.equal(readlinkSync(path.join(local, 'a/b/.bin/k')), '../../x');

    await refused('folder moved to 1 deep', `mv ${m}/a/b/.bin ${m}/.bin`);
    await refused('the link moved to the root', `mv ${m}/a/b/.bin/k ${m}/k`);
    await refused('the link moved to 1 deep', `mv ${m}/a/b/.bin/k ${m}/a/k`);
    assert.equal(existsSync(path.join(local, '.bin')), false, '.bin was moved to the root');
    for (const rel of ['k', 'a/k'])
      assert.throws(() => lstatSync(path.join(local, rel)), /ENOENT/, `${rel} was made`);
    assert.equal(readlinkSync(path.join(local, 'a/b/.bin/k')), '../../x');
    assert.deepEqual(linksLeadingOut(realpathSync.native(local)), []);

    // Moves after which the links still stay within the folder go through.
    const moved = await execCollect(
      client,
      `mv ${m}/a/b/plain ${m}/plain && mv ${m}/a/b/.bin/k ${m}/a/b/.bin/k2 && mv ${m}/a/b/.bin ${m}/a/.bin && cat ${m}/plain/l ${m}/a/.bin/k2`,
    );
    assert.equal(moved.code, 0, moved.stderr);
    // From 2 deep, ../../x is the folder's own x.
    assert.equal(moved.stdout, 'p\ntop x\n');
    assert.equal(readlinkSync(path.join(local, 'a/.bin/k2')), '../../x');
    assert.deepEqual(linksLeadingOut(realpathSync.native(local)), []);
  });

  it('lets npm install a package with a bin into the folder through the mount, offline', async () => {
    // A package with a `bin`, packed on this machine: npm makes node_modules/.bin/greet -> ../greeter/cli.js.
    const packageDir = path.join(work, 'greeter');
    const cache = path.join(work, 'npm-cache');
    mkdirSync(packageDir);
    writeFileSync(
      path.join(packageDir, 'package.json'),
      JSON.stringify({ name: 'greeter', version: '1.0.0', bin: { greet: 'cli.js' } }),
    );
    writeFileSync(
      path.join(packageDir, 'cli.js'),
      '#!/usr/bin/env node\nconsole.log("hello from greeter");\n',
    );
    const packed = spawnSync('npm', ['pack', '--pack-destination', work, '--cache', cache], {
      cwd: packageDir,
      encoding: 'utf8',
    });
    assert.equal(packed.status, 0, packed.stderr);
    const tarball = path.join(work, 'greeter-1.0.0.tgz');

    // Mounted as the gateway mounts: without follow_symlinks, under which the kernel fails npm's `symlink`.
    const asGateway = path.join(work, 'mnt-as-gateway');
    mkdirSync(asGateway);
    await mountWithPassiveSshfs(client, local, asGateway, { followSymlinks: false });
    const app = `${asGateway}/app`;
    const installed = await execCollect(
      client,
      `mkdir ${shellQuote(app)} && cd ${shellQuote(app)} && printf '{"name":"app","version":"1.0.0","private":true}' > package.json` +
        ` && npm install --offline --no-audit --no-fund --cache ${shellQuote(cache)} ${shellQuote(tarball)}`,
    );
    assert.equal(installed.code, 0, installed.stderr);
    // (Through the mount, Debian's sshfs 3.7.3-1.2 refuses to read a link with "..": contain_symlinks.)
    assert.equal(readlinkSync(path.join(local, 'app/node_modules/.bin/greet')), '../greeter/cli.js');
    const onLaptop = spawnSync(path.join(local, 'app/node_modules/.bin/greet'), { encoding: 'utf8' });
    assert.equal(onLaptop.stdout, 'hello from greeter\n', onLaptop.stderr);
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
