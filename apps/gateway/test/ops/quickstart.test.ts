/**
 * A newcomer's first hour, literally: a fresh clone, the README's first command as written (a background root
 * shell with Debian's default umask and no terminal), the README's quickstart block as written, then an SSH
 * session as the workspace's user that resolves a name and sees the lab's exit. Then the same gateway started
 * the way the shipped systemd unit starts it (its Environment, UMask, WorkingDirectory and ExecStart).
 * Uses the full image and the README's own ports (8080, 2222), as users get them.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { parse as parseDotenv } from 'dotenv';
import { type LabDescription, readLab } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { eventually, REPO_ROOT } from '../helpers/gateway-process.js';
import { removeHostResources } from '../helpers/lab-gateway.js';

const exec = promisify(execFile);
const API = 'http://localhost:8080';
/** What systemd gives a system service that sets no PATH of its own. */
const SYSTEMD_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const UNIT = 'deploy/cloud-cli-proxy.service';

/** The README's first command: the first line of its first shell block, without the comment. */
function readmeFirstCommand(readme: string): string {
  const block = /```sh\n([\s\S]*?)\n```/.exec(readme);
  assert.ok(block, 'README.md has a shell block');
  const line = block[1]!.split('\n')[0]!.replace(/\s+#.*$/, '');
  assert.match(line, /^bash deploy\/setup\.sh --demo$/, 'the first command is the demo set-up');
  return line;
}

/** The shell block under `<!-- quickstart -->`, up to its final `ssh` (interactive: done below instead). */
function quickstartUpToSsh(readme: string): string {
  const match = /<!-- quickstart -->\n```sh\n([\s\S]*?)\n```/.exec(readme);
  assert.ok(match, 'README.md has a quickstart block');
  const lines = match[1]!.split('\n');
  const ssh = lines.findIndex((line) => line.startsWith('ssh '));
  assert.ok(ssh > 0, 'the quickstart ends with ssh');
  return lines.slice(0, ssh).join('\n');
}

/** The unit's `Key=value` lines, each key's values in order. */
function unitSettings(text: string): Map<string, string[]> {
  const settings = new Map<string, string[]>();
  for (const line of text.split('\n')) {
    const match = /^([A-Za-z]+)=(.*)$/.exec(line.trim());
    if (match) settings.set(match[1]!, [...(settings.get(match[1]!) ?? []), match[2]!]);
  }
  return settings;
}

describe("the README's first hour, on a fresh clone", {
  skip: needs('lab', 'docker'),
  timeout: 50 * 60_000,
}, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-first-hour-'));
  const clone = path.join(work, 'cloud-cli-proxy');
  const hostIds: string[] = [];
  let gateway: ChildProcess | null = null;
  let logFile = '';
  let lab: LabDescription;

  before(async () => {
    // The commit under test, as a newcomer gets it: nothing built, installed or generated.
    await exec('git', ['clone', '--quiet', REPO_ROOT, clone]);
  });

  after(async () => {
    await stopGateway();
    await removeHostResources(hostIds);
    rmSync(work, { recursive: true, force: true });
  });

  const log = () => readFileSync(logFile, 'utf8');
  const tail = () => log().split('\n').slice(-60).join('\n');

  /** Starts `argv` in its own process group (so it can be stopped whole), output to a log file. */
  function startInBackground(name: string, argv: string[], cwd: string, env: Record<string, string>) {
    logFile = path.join(work, `${name}.log`);
    const out = openSync(logFile, 'a');
    const child = spawn(argv[0]!, argv.slice(1), { cwd, env, detached: true, stdio: ['ignore', out, out] });
    closeSync(out);
    gateway = child;
    return child;
  }

  async function stopGateway(): Promise<void> {
    const child = gateway;
    gateway = null;
    if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    process.kill(-child.pid, 'SIGTERM');
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 30_000))]);
    if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid, 'SIGKILL');
  }

  /** Waits for the API, printing the newest progress line of the log now and then (set-up takes minutes). */
  async function waitForGateway(child: ChildProcess, minutes: number): Promise<void> {
    let shown = '';
    const progress = setInterval(() => {
      const line = log()
        .split('\n')
        .filter((entry) => entry.startsWith('==>'))
        .at(-1);
      if (!line || line === shown) return;
      shown = line;
      console.log(`# ${line}`);
    }, 20_000);
    try {
      await eventually(
        'the gateway to answer on :8080',
        async () => {
          if (child.exitCode !== null) throw new Error('exited');
          return (await fetch(`${API}/healthz`)).status < 500;
        },
        minutes * 60_000,
      ).catch((error: Error) => {
        throw new Error(`${error.message}; exit ${child.exitCode}; its output ends:\n${tail()}`);
      });
    } finally {
      clearInterval(progress);
    }
  }

  /** The quickstart as written, in the clone; then SSH as the host's user: who, a lookup, the exit. */
  async function quickstartAndSsh(): Promise<void> {
    const readme = readFileSync(path.join(clone, 'README.md'), 'utf8');
    const script = `${quickstartUpToSsh(readme)}\nprintf '\\nQUICKSTART %s %s\\n' "$SSH_USER" "$HOST_ID"`;
    const run = spawnSync('bash', ['-euo', 'pipefail', '-c', script], {
      cwd: clone,
      env: { PATH: process.env.PATH ?? '', HOME: '/root' },
      encoding: 'utf8',
      timeout: 300_000,
    });
    const [, sshUser, hostId] = /QUICKSTART (\S+) (\S+)/.exec(run.stdout) ?? [];
    if (hostId) hostIds.push(hostId);
    assert.equal(run.status, 0, `${run.stdout}\n${run.stderr}\n--- gateway:\n${tail()}`);
    assert.match(run.stdout, /"ok": true/, 'the egress test passed');
    assert.match(run.stdout, /"status": "running"/, `${run.stdout}\n--- gateway:\n${tail()}`);
    assert.ok(sshUser);

    lab = (await readLab())!;
    const web = lab.public!.web.name;
    const ssh = await exec(
      'sshpass',
      [
        '-e',
        'ssh',
        ...['-p', '2222', '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null'],
        ...['-o', 'PubkeyAuthentication=no', '-o', 'LogLevel=ERROR'],
        `${sshUser}@localhost`,
        `id -un; getent hosts ${web} >/dev/null && echo resolved; curl -fsS --max-time 20 http://${web}/ip`,
      ],
      // The user's login password, as the quickstart's last line says.
      { env: { PATH: process.env.PATH ?? '', SSHPASS: 'a-long-password' }, timeout: 60_000 },
    ).catch((error: { stdout?: string; stderr?: string }) => error);
    assert.deepEqual(
      `${ssh.stdout}`.trim().split('\n'),
      ['alice', 'resolved', lab.exits[0]!.address],
      `as the workspace's user: ${ssh.stdout}\n${ssh.stderr}`,
    );
  }

  it('`bash deploy/setup.sh --demo` in a background root shell, then the quickstart: the user resolves names and sees the exit', async () => {
    const command = readmeFirstCommand(readFileSync(path.join(clone, 'README.md'), 'utf8'));
    // A root login shell on Debian: umask 022, its own PATH and HOME, no terminal.
    const child = startInBackground('setup', ['sh', '-c', `umask 022; ${command}`], clone, {
      PATH: SYSTEMD_PATH,
      HOME: '/root',
      USER: 'root',
      SHELL: '/bin/bash',
    });
    await waitForGateway(child, 40);
    const env = parseDotenv(readFileSync(path.join(clone, '.env')));
    assert.equal(
      Object.keys(env).some((name) => name.startsWith('EGRESS_PROBE_')),
      false,
      'the demo verifies the way a fresh install does: no probe of its own',
    );
    assert.match(log(), /Demo: +the README's quickstart runs as written/);
    await quickstartAndSsh();
  });

  it('the gateway started as the systemd unit starts it passes the same checks', async () => {
    await stopGateway();
    // A new database, so the quickstart runs as written once more (its user and host are new again).
    await removeHostResources(hostIds);
    const env = parseDotenv(readFileSync(path.join(clone, '.env')));
    rmSync(env.DATA_DIR!, { recursive: true, force: true });

    const unit = unitSettings(readFileSync(path.join(clone, UNIT), 'utf8'));
    const [workingDirectory] = unit.get('WorkingDirectory') ?? [];
    const [umask] = unit.get('UMask') ?? [];
    const [execStart] = unit.get('ExecStart') ?? [];
    assert.ok(workingDirectory && umask && execStart, `${UNIT} names its directory, umask and command`);
    const serviceEnv: Record<string, string> = { PATH: SYSTEMD_PATH };
    for (const line of unit.get('Environment') ?? [])
      for (const pair of line.split(/\s+/)) {
        const at = pair.indexOf('=');
        serviceEnv[pair.slice(0, at)] = pair.slice(at + 1);
      }
    // The unit says to adjust WorkingDirectory to where the repository is: here, the clone.
    const cwd = workingDirectory.replace('/opt/cloud-cli-proxy', clone);
    const child = startInBackground(
      'systemd',
      ['sh', '-c', 'umask "$0" && exec "$@"', umask, ...execStart.split(/\s+/)],
      cwd,
      serviceEnv,
    );
    await waitForGateway(child, 2);
    await quickstartAndSsh();
  });
});
