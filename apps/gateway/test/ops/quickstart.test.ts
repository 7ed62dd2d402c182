/**
 * The README's quickstart, as a newcomer runs it: `deploy/setup.sh --demo` writes the settings (here without
 * installing or building: the suite did that), the gateway starts from them, the README's block runs as it is,
 * and the SSH session it ends in sees the lab's exit. Uses the README's own ports (8080, 2222).
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { parse as parseDotenv } from 'dotenv';
import { ensureLab, type LabDescription } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { HOST_LABEL } from '../../src/runtime/container-specs.js';
import { buildTestImages } from '../helpers/lab-egress.js';

const exec = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../../../..');
const main = path.join(root, 'apps/gateway/dist/main.js');

/** The shell block under `<!-- quickstart -->` in README.md. */
function quickstart(): string {
  const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
  const match = /<!-- quickstart -->\n```sh\n([\s\S]*?)\n```/.exec(readme);
  assert.ok(match, 'README.md has a quickstart block');
  return match[1]!;
}

async function waitHealthy(url: string, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`the gateway exited:\n${output()}`);
    try {
      if ((await fetch(`${url}/healthz`)).status < 500) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`the gateway did not answer:\n${output()}`);
}

describe("the README's quickstart with --demo", { skip: needs('lab', 'docker'), timeout: 600_000 }, () => {
  let dir: string;
  let lab: LabDescription;
  let gateway: ChildProcess | undefined;
  let output = '';
  let hostId: string | undefined;

  before(async () => {
    await buildTestImages();
    lab = await ensureLab();
    if (!lab.public) return;
    dir = mkdtempSync(path.join(tmpdir(), 'ccp-quickstart-'));
    const setup = spawnSync(
      'bash',
      [path.join(root, 'deploy/setup.sh'), '--demo', '--config-only', '--image-variant', 'test'],
      {
        cwd: root,
        env: {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? '/root',
          ENV_FILE: path.join(dir, '.env'),
          DATA_DIR: path.join(dir, 'data'),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
        encoding: 'utf8',
      },
    );
    assert.equal(setup.status, 0, `${setup.stdout}\n${setup.stderr}`);
    assert.match(setup.stdout, /Demo: +the README's quickstart runs as written/);
    const env = parseDotenv(readFileSync(path.join(dir, '.env')));
    assert.equal(
      Object.keys(env).some((name) => name.startsWith('EGRESS_PROBE_')),
      false,
      'the demo verifies the way a fresh install does: no probe of its own',
    );
    assert.ok(env.PUBLIC_HOST, 'set-up chose a public host');

    gateway = spawn(process.execPath, [main], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', EGRESS_HEALTH_SECONDS: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    gateway.stdout!.on('data', (chunk) => (output += chunk));
    gateway.stderr!.on('data', (chunk) => (output += chunk));
    await waitHealthy('http://localhost:8080', gateway, () => output);
    assert.match(output, /egress verification: public endpoints/);
  });

  after(async () => {
    if (gateway && gateway.exitCode === null) {
      const exited = new Promise((resolve) => gateway!.once('exit', resolve));
      gateway.kill('SIGTERM');
      await exited;
    }
    // Whatever the quickstart's host left if the test failed before removing it.
    if (hostId && dir) {
      const label = `label=${HOST_LABEL}=${hostId}`;
      const { stdout } = await exec('docker', ['ps', '-aq', '--filter', label]);
      for (const id of stdout.split('\n').filter(Boolean))
        await exec('docker', ['rm', '-f', '-v', id]).catch(() => undefined);
      const volumes = await exec('docker', ['volume', 'ls', '-q', '--filter', label]);
      for (const name of volumes.stdout.split('\n').filter(Boolean))
        await exec('docker', ['volume', 'rm', name]).catch(() => undefined);
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('ends in a running, verified host and an SSH session whose exit is the lab exit', async (t) => {
    if (!lab.public) return t.skip('the running lab has no public stand-ins (lab.sh up builds them)');
    const lines = quickstart().split('\n');
    const sshLine = lines.findIndex((line) => line.startsWith('ssh '));
    assert.ok(sshLine > 0, 'the quickstart ends with ssh');
    const script = [
      ...lines.slice(0, sshLine),
      'printf "\\nQUICKSTART %s %s %s %s\\n" "$SSH_USER" "$SSH_PASS" "$HOST_ID" "$TOKEN"',
    ].join('\n');
    const run = spawnSync('bash', ['-euo', 'pipefail', '-c', script], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root' },
      encoding: 'utf8',
      timeout: 300_000,
    });
    assert.equal(run.status, 0, `${run.stdout}\n${run.stderr}\n--- gateway:\n${output}`);
    assert.match(run.stdout, /"ok": true/, 'the egress test passed');
    assert.match(run.stdout, /"status": "running"/, `${run.stdout}\n--- gateway:\n${output}`);
    const [, sshUser, sshPass, id, token] = /QUICKSTART (\S+) (\S+) (\S+) (\S+)/.exec(run.stdout) ?? [];
    assert.ok(sshUser && sshPass && id && token);
    hostId = id;

    const ssh = await exec(
      'sshpass',
      [
        '-e',
        'ssh',
        '-p',
        '2222',
        '-o',
        'StrictHostKeyChecking=no',
        '-o',
        'UserKnownHostsFile=/dev/null',
        '-o',
        'PubkeyAuthentication=no',
        '-o',
        'LogLevel=ERROR',
        `${sshUser}@localhost`,
        `curl -fsS --max-time 20 http://${lab.public.web.name}/ip`,
      ],
      { env: { PATH: process.env.PATH ?? '', SSHPASS: sshPass }, timeout: 60_000 },
    );
    assert.equal(ssh.stdout.trim(), lab.exits[0]!.address);

    const removed = await fetch(`http://localhost:8080/v1/admin/hosts/${hostId}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${token}` },
    });
    assert.ok(removed.status < 300, `DELETE answered ${removed.status}`);
  });
});
