import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { needs } from '../../../../test/support/needs.js';
import { EGRESS_GATEWAY_CAPABILITIES } from '../../src/runtime/container-specs.js';
import { IMAGE_ROOT } from '../../src/runtime/image-inputs.js';

// Builds the test variant of both images for real (cached by tag), then runs them the way the runtime will.
const hostId = `test-${randomBytes(4).toString('hex')}`;
const label = `cloud-cli-proxy.host=${hostId}`;
const names = {
  network: `ccp-net-${hostId}`,
  home: `ccp-home-${hostId}`,
  hostkeys: `ccp-hostkeys-${hostId}`,
  workspace: `ccp-ws-${hostId}`,
  egress: `ccp-egress-${hostId}`,
  brokenEgress: `ccp-egress-broken-${hostId}`,
};
// What sshd and the entrypoint need, and what turns sudo into a root that can act on the user's files and
// processes (image/README.md explains each).
const sshdCaps = ['SETUID', 'SETGID', 'CHOWN', 'SYS_CHROOT', 'AUDIT_WRITE'];
const sudoCaps = ['DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL'];
const egressSysctls = [
  'net.ipv4.ip_forward=0',
  'net.ipv6.conf.all.disable_ipv6=1',
  'net.ipv6.conf.default.disable_ipv6=1',
];
const sshOptions = [
  '-o',
  'StrictHostKeyChecking=no',
  '-o',
  'UserKnownHostsFile=/dev/null',
  '-o',
  'LogLevel=ERROR',
  '-o',
  'ConnectTimeout=5',
  '-o',
  'BatchMode=no',
];

const exec = promisify(execFile);

async function docker(...args: string[]): Promise<string> {
  const { stdout } = await exec('docker', args, { maxBuffer: 16 * 1024 * 1024 });
  return stdout.trim();
}

/** Runs image/build.sh with its progress on this process's stderr; resolves with its `image name=tag` lines. */
function buildImages(): Promise<Map<string, string>> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [path.join(IMAGE_ROOT, 'build.sh'), '--variant', 'test', 'all'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
    });
    child.on('error', reject);
    // 'close': stdout (the tags) may still be arriving at exit.
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`image/build.sh exited with ${code}`));
      const tags = new Map<string, string>();
      for (const [, name, tag] of stdout.matchAll(/^image ([a-z-]+)=(\S+)$/gm)) tags.set(name!, tag!);
      resolve(tags);
    });
  });
}

async function containerIp(name: string): Promise<string> {
  return docker('inspect', '--format', '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}', name);
}

/** Resolves once sshd sends its banner (a TCP connect alone can succeed before sshd is up). */
async function waitForBanner(ip: string, timeoutMs = 15_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const banner = await new Promise<string | undefined>((resolve) => {
      const socket = net.connect({ host: ip, port: 22, timeout: 1000 });
      let data = '';
      socket.on('data', (chunk) => {
        data += chunk;
        if (data.includes('\n')) {
          socket.destroy();
          resolve(data.trim());
        }
      });
      socket.on('error', () => resolve(undefined));
      socket.on('timeout', () => {
        socket.destroy();
        resolve(undefined);
      });
    });
    if (banner?.startsWith('SSH-')) return banner;
    if (Date.now() > deadline) throw new Error(`no SSH banner from ${ip}:22`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function sshWithPassword(ip: string, password: string, command: string): Promise<string> {
  const { stdout } = await exec(
    'sshpass',
    ['-e', 'ssh', ...sshOptions, '-o', 'PubkeyAuthentication=no', `alice@${ip}`, command],
    { env: { ...process.env, SSHPASS: password } },
  );
  return stdout.trim();
}

async function sshWithKey(ip: string, keyFile: string, command: string): Promise<string> {
  const { stdout } = await exec('ssh', [
    ...sshOptions,
    '-o',
    'PasswordAuthentication=no',
    '-o',
    'IdentitiesOnly=yes',
    '-i',
    keyFile,
    `alice@${ip}`,
    command,
  ]);
  return stdout.trim();
}

async function hostKey(ip: string): Promise<string> {
  const { stdout } = await exec('ssh-keyscan', ['-t', 'ed25519', ip]);
  const line = stdout.split('\n').find((l) => l.includes('ssh-ed25519'));
  assert.ok(line, `ssh-keyscan found no ed25519 key at ${ip}`);
  return line.split(' ').slice(1).join(' ');
}

function capArgs(caps: string[]): string[] {
  return ['--cap-drop', 'ALL', ...caps.flatMap((cap) => ['--cap-add', cap])];
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const skip = needs('docker');

describe('workspace and egress gateway images', { skip, timeout: 15 * 60_000 }, () => {
  let tags: Map<string, string>;
  let scratch: string;
  let keyFile: string;

  before(
    async () => {
      scratch = await mkdtemp(path.join(tmpdir(), 'ccp-images-'));
      keyFile = path.join(scratch, 'id_ed25519');
      await exec('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'gateway', '-f', keyFile]);
      await writeFile(path.join(scratch, 'password'), 'first password\n');
      tags = await buildImages();
      await docker('network', 'create', '--internal', '--label', label, names.network);
      await docker('volume', 'create', '--label', label, names.home);
      await docker('volume', 'create', '--label', label, names.hostkeys);
    },
    { timeout: 10 * 60_000 },
  );

  after(async () => {
    const containers = (await docker('ps', '-aq', '--filter', `label=${label}`)).split('\n').filter(Boolean);
    if (containers.length > 0) await docker('rm', '-f', '-v', ...containers);
    const volumes = (await docker('volume', 'ls', '-q', '--filter', `label=${label}`))
      .split('\n')
      .filter(Boolean);
    if (volumes.length > 0) await docker('volume', 'rm', ...volumes);
    const networks = (await docker('network', 'ls', '-q', '--filter', `label=${label}`))
      .split('\n')
      .filter(Boolean);
    if (networks.length > 0) await docker('network', 'rm', ...networks);
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  function workspaceArgs(caps: string[], credentials: string[]): string[] {
    return [
      'run',
      '--detach',
      '--init',
      '--name',
      names.workspace,
      '--label',
      label,
      '--network',
      names.network,
      ...capArgs(caps),
      '--env',
      'WORKSPACE_USER=alice',
      '--env',
      'WORKSPACE_UID=1001',
      '--volume',
      `${names.home}:/home/alice`,
      '--volume',
      `${names.hostkeys}:/etc/ssh/hostkeys`,
      ...credentials,
      tags.get('workspace')!,
    ];
  }

  let ip: string;
  let firstHostKey: string;

  it('the workspace starts and sshd answers with its banner', async () => {
    await docker(
      ...workspaceArgs(
        [...sshdCaps, ...sudoCaps],
        [
          '--env',
          'WORKSPACE_PASSWORD_FILE=/run/ccp/password',
          '--env',
          'WORKSPACE_AUTHORIZED_KEYS_FILE=/run/ccp/authorized_keys',
          '--volume',
          `${path.join(scratch, 'password')}:/run/ccp/password:ro`,
          '--volume',
          `${keyFile}.pub:/run/ccp/authorized_keys:ro`,
        ],
      ),
    );
    ip = await containerIp(names.workspace);
    assert.match(await waitForBanner(ip), /^SSH-2\.0-OpenSSH_/);
    firstHostKey = await hostKey(ip);
  });

  it('logs in with the password and has the tools', async () => {
    const out = await sshWithPassword(
      ip,
      'first password',
      'id -u; echo "$SHELL"; tmux -V; git --version; zsh --version; claude --version; pwd',
    );
    const lines = out.split('\n');
    assert.equal(lines[0], '1001');
    assert.equal(lines[1], '/bin/zsh');
    assert.match(lines[2]!, /^tmux \d/);
    assert.match(lines[3]!, /^git version \d/);
    assert.match(lines[4]!, /^zsh \d/);
    assert.match(lines[5]!, /Claude Code/);
    assert.equal(lines[6], '/home/alice');
  });

  it('logs in with the key and becomes root with sudo, without a password', async () => {
    const out = await sshWithKey(ip, keyFile, 'sudo -n true && sudo -n id -u && ls -a ~');
    const lines = out.split('\n');
    assert.equal(lines[0], '0');
    assert.ok(lines.includes('.zshrc'), 'the home was populated from /etc/skel');
    // With the extra capabilities, root reaches the user's private files.
    assert.equal(await sshWithKey(ip, keyFile, 'umask 077; echo x >~/private; sudo -n cat ~/private'), 'x');
  });

  it("starts a new home's first interactive zsh on the completion dump the image made", async () => {
    // compinit rewrites a dump it does not accept; building one costs a shell about 1.7 s of CPU.
    const out = await sshWithKey(
      ip,
      keyFile,
      'before=$(stat -c %y ~/.zcompdump) && zsh -i -c true && [ "$(stat -c %y ~/.zcompdump)" = "$before" ] && ' +
        'cmp /etc/skel/.zcompdump ~/.zcompdump && echo kept',
    );
    assert.equal(out, 'kept');
  });

  it('runs no message-of-the-day programs at an SSH login', async () => {
    // pam_motd's dynamic part writes this file at each login it runs its programs for.
    assert.equal(
      await sshWithKey(ip, keyFile, 'test -e /run/motd.dynamic && echo made || echo none'),
      'none',
    );
  });

  it('refuses a wrong password and root', async () => {
    await assert.rejects(sshWithPassword(ip, 'wrong password', 'true'));
    await assert.rejects(
      exec('sshpass', ['-e', 'ssh', ...sshOptions, `root@${ip}`, 'true'], {
        env: { ...process.env, SSHPASS: 'first password' },
      }),
    );
  });

  it('keeps the home and the host key when the container is recreated (minimal capabilities)', async () => {
    await sshWithKey(ip, keyFile, 'echo kept >~/persist.txt');
    await docker('rm', '--force', names.workspace);
    const publicKey = (await readFile(`${keyFile}.pub`, 'utf8')).trim();
    // Credentials from environment variables this time, and only the capabilities sshd itself needs.
    await docker(
      ...workspaceArgs(sshdCaps, [
        '--env',
        'WORKSPACE_PASSWORD=second password',
        '--env',
        `WORKSPACE_AUTHORIZED_KEYS=${publicKey}`,
      ]),
    );
    ip = await containerIp(names.workspace);
    await waitForBanner(ip);
    assert.equal(await hostKey(ip), firstHostKey);
    assert.equal(
      await sshWithPassword(ip, 'second password', 'cat ~/persist.txt; stat -c %U ~/persist.txt'),
      'kept\nalice',
    );
    assert.equal(await sshWithKey(ip, keyFile, 'sudo -n id -u'), '0');
    await assert.rejects(sshWithPassword(ip, 'first password', 'true'));
    const logs = await exec('docker', ['logs', names.workspace]);
    assert.doesNotMatch(logs.stderr, /populated|generated a new SSH host key/);
  });

  function egressArgs(name: string, config: string): string[] {
    return [
      'run',
      '--detach',
      '--init',
      '--name',
      name,
      '--label',
      label,
      '--network',
      names.network,
      ...capArgs([...EGRESS_GATEWAY_CAPABILITIES]),
      ...egressSysctls.flatMap((s) => ['--sysctl', s]),
      '--volume',
      `${config}:/etc/ccp-egress:ro`,
      tags.get('egress-gateway')!,
    ];
  }

  async function v2rayPid(name: string): Promise<string> {
    return docker('exec', name, 'cat', '/run/ccp-egress/v2ray.pid');
  }

  it('the egress gateway loads its ruleset and supervises an unprivileged v2ray', async () => {
    const config = path.join(scratch, 'egress');
    await exec('mkdir', ['-p', config]);
    await writeFile(
      path.join(config, 'ruleset.nft'),
      'table inet ccp_test {\n  chain output {\n    type filter hook output priority 0; policy drop;\n' +
        '    oifname "lo" accept\n  }\n}\n',
    );
    await writeFile(
      path.join(config, 'v2ray.json'),
      JSON.stringify({
        inbounds: [{ listen: '127.0.0.1', port: 10800, protocol: 'socks' }],
        outbounds: [{ protocol: 'blackhole' }],
      }),
    );
    // Root-only files: the entrypoint reads them as root and hands v2ray its config on stdin.
    await chmod(path.join(config, 'v2ray.json'), 0o600);
    await docker(...egressArgs(names.egress, config));

    const first = await waitFor('v2ray to start', () => v2rayPid(names.egress));
    assert.match(
      await docker('exec', names.egress, 'nft', 'list', 'table', 'inet', 'ccp_test'),
      /policy drop/,
    );
    const status = await docker('exec', names.egress, 'cat', `/proc/${first}/status`);
    assert.doesNotMatch(status, /^Uid:\s+0\s/m, 'v2ray runs as root');
    const capEff = BigInt(`0x${/^CapEff:\s+([0-9a-f]+)$/m.exec(status)![1]}`);
    assert.equal(capEff, (1n << 12n) | (1n << 10n), 'v2ray holds exactly NET_ADMIN and NET_BIND_SERVICE');
    // A smaller heap target than Go's default keeps an idle gateway's v2ray smaller (issue 28).
    // Read from the host: v2ray's capabilities keep the container's root from its /proc/<pid>/environ.
    const hostPid = (await docker('top', names.egress, '-eo', 'pid,comm'))
      .split('\n')
      .find((line) => line.trim().endsWith(' v2ray'))
      ?.trim()
      .split(/\s+/)[0];
    const environ = await readFile(`/proc/${hostPid}/environ`, 'utf8');
    assert.ok(environ.split('\0').includes('GOGC=50'), 'v2ray runs with GOGC=50');

    await docker('exec', names.egress, 'kill', first);
    const second = await waitFor('v2ray to be restarted', async () => {
      const pid = await v2rayPid(names.egress);
      return pid !== first ? pid : undefined;
    });
    await docker('kill', '--signal', 'HUP', names.egress);
    await waitFor('v2ray to be reloaded', async () => {
      const pid = await v2rayPid(names.egress);
      return pid !== second ? pid : undefined;
    });
    const logs = await docker('logs', names.egress);
    assert.match(logs, /nftables ruleset loaded[\s\S]*v2ray started/);
    assert.match(logs, /v2ray exited with status \d+ after \d+s; restarting in 1s/);
    assert.match(logs, /v2ray stopped for a reload/);
  });

  it('the egress gateway does not start v2ray when the ruleset does not load', async () => {
    const config = path.join(scratch, 'broken');
    await exec('mkdir', ['-p', config]);
    await writeFile(path.join(config, 'ruleset.nft'), 'table inet broken { this is not nft }\n');
    await writeFile(path.join(config, 'v2ray.json'), '{}');
    await docker(...egressArgs(names.brokenEgress, config));
    const exitCode = await waitFor('the container to exit', async () => {
      const state = await docker(
        'inspect',
        '--format',
        '{{.State.Running}} {{.State.ExitCode}}',
        names.brokenEgress,
      );
      return state.startsWith('false ') ? Number(state.split(' ')[1]) : undefined;
    });
    assert.notEqual(exitCode, 0);
    const logs = await exec('docker', ['logs', names.brokenEgress]);
    assert.match(logs.stdout, /did not load/);
    assert.doesNotMatch(logs.stdout, /v2ray started/);
  });
});
