import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { labUnavailable } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { type LabGateway, startLabGateway } from '../helpers/lab-gateway.js';
import { keyOnly, proxyOptions, runClient, sshWithKey, within } from '../helpers/openssh.js';
import { KeyFactory } from '../helpers/ssh-keygen.js';

/**
 * What users and their assistants run first in a workspace shell (image/workspace/base/packages), each with a
 * command that proves it works, not only that a file of that name exists.
 */
const TOOLS: Record<string, string> = {
  rsync: 'rsync --version',
  less: 'less --version',
  unzip: 'unzip -v',
  zip: 'zip -v',
  xz: 'xz --version',
  bzip2: 'bzip2 --help',
  jq: `jq -n '{tool: "jq"}'`,
  make: 'make --version',
  patch: 'patch --version',
  python3: `python3 -c 'import json, sqlite3, venv; print("python3")'`,
  rg: 'rg --version',
  file: 'file /bin/sh',
  tree: 'tree -L 1 /',
  nano: 'nano --version',
  vi: 'vi --version',
  ps: 'ps -p 1',
  curl: 'curl --version',
  git: 'git --version',
};

describe('a workspace, with the tools users reach for, and rsync through the SSH proxy', {
  skip: labUnavailable() || needs('ssh', 'ssh-keygen', 'rsync'),
  timeout: 600_000,
}, () => {
  const username = `wt${randomBytes(3).toString('hex')}`;
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-workspace-tools-'));
  const keys = new KeyFactory();
  let lab: LabGateway;
  let port: number;
  let keyFile: string;
  let login: string;

  /** The way a user runs rsync over the proxy: `rsync -e 'ssh -p <port> …'`, OpenSSH as the transport. */
  const rsync = (args: string[]) =>
    runClient('rsync', ['-e', ['ssh', ...proxyOptions(port), ...keyOnly(keyFile)].join(' '), ...args], {
      timeoutMs: 120_000,
    });
  const inWorkspace = (command: string) => sshWithKey(port, keyFile, [`${login}@127.0.0.1`, command]);

  before(async () => {
    lab = await startLabGateway();
    const t = lab.t;
    port = t.gateway.ssh.port;
    const user = await t.createUser(username);
    const host = await lab.createHost(user.id);
    login = `${username}+${host.short_id}`;
    const key = keys.generate('ed25519');
    keyFile = path.join(work, 'id_ed25519');
    writeFileSync(keyFile, key.privateKey, { mode: 0o600 });
    const added = await t.request('POST', `/v1/admin/users/${user.id}/ssh-keys`, {
      body: { public_key: key.publicKey },
    });
    assert.equal(added.status, 201, JSON.stringify(added.body));
    await within(300_000, 'the workspace start', lab.startHost(host.id));
  });

  after(async () => {
    await lab?.close();
    keys.cleanup();
    rmSync(work, { recursive: true, force: true });
  });

  it('copies a folder into the workspace with rsync -e ssh, then only what changed, and back', async () => {
    const source = path.join(work, 'project');
    mkdirSync(path.join(source, 'src', 'deep'), { recursive: true });
    const payload = randomBytes(256 * 1024);
    writeFileSync(path.join(source, 'data.bin'), payload);
    writeFileSync(path.join(source, 'src', 'deep', 'notes.txt'), 'copied with rsync\n');
    writeFileSync(path.join(source, 'run.sh'), '#!/bin/sh\necho ran\n');
    chmodSync(path.join(source, 'run.sh'), 0o755);

    const up = await rsync(['-a', `${source}/`, `${login}@127.0.0.1:project/`]);
    assert.equal(up.code, 0, up.stderr);
    const there = await inWorkspace(
      'cd ~/project && cat src/deep/notes.txt && ./run.sh && stat -c %U data.bin && sha256sum data.bin',
    );
    assert.equal(there.code, 0, there.stderr);
    const sha256 = createHash('sha256').update(payload).digest('hex');
    assert.equal(there.stdout, `copied with rsync\nran\n${username}\n${sha256}  data.bin\n`);

    // A second run sends only the file that changed (what rsync is for).
    writeFileSync(path.join(source, 'src', 'deep', 'notes.txt'), 'changed here\n');
    const again = await rsync(['-a', '--out-format=%n', `${source}/`, `${login}@127.0.0.1:project/`]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stdout, 'src/deep/notes.txt\n');

    const back = path.join(work, 'back');
    const down = await rsync(['-a', `${login}@127.0.0.1:project/`, `${back}/`]);
    assert.equal(down.code, 0, down.stderr);
    assert.equal(readFileSync(path.join(back, 'src', 'deep', 'notes.txt'), 'utf8'), 'changed here\n');
    assert.deepEqual(readFileSync(path.join(back, 'data.bin')), payload);
    assert.equal(statSync(path.join(back, 'run.sh')).mode & 0o777, 0o755);
  });

  it("has every tool on the user's PATH, working for the user (not root)", async () => {
    const script = [
      'id -un',
      ...Object.entries(TOOLS).map(
        ([name, command]) =>
          `if ${command} >/dev/null 2>&1; then echo "ok ${name}"; else echo "failed ${name}"; fi`,
      ),
    ].join('\n');
    const result = await inWorkspace(script);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(result.stdout.trim().split('\n'), [
      username,
      ...Object.keys(TOOLS).map((name) => `ok ${name}`),
    ]);
  });
});
