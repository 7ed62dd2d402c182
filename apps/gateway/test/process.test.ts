import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { freeLoopbackPort } from '../src/egress/loopback-ports.js';
import { GATEWAY_NODE_FLAGS } from '../src/node-flags.js';

const root = path.resolve(import.meta.dirname, '../../..');
const main = path.join(root, 'apps/gateway/dist/main.js');

/** `node <flags> apps/gateway/dist/main.js`, by default with the flags `npm start` gives it. */
function run(
  cwd: string,
  env: Record<string, string>,
  flags: readonly string[] = GATEWAY_NODE_FLAGS,
): { child: ChildProcess; output: () => string; exit: Promise<number | null> } {
  let output = '';
  const child = spawn(process.execPath, [...flags, main], {
    cwd,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => output, exit };
}

/** The settings of a gateway with its data in `dir` and its API on 127.0.0.1:`httpPort`, without Docker. */
function settingsIn(dir: string, httpPort: number): Record<string, string> {
  return {
    ADMIN_JWT_SECRET: 'k'.repeat(48),
    ADMIN_PASSWORD: 'first-admin-pass',
    DATA_DIR: `${dir}/data`,
    DOCKER_SOCKET: `${dir}/none.sock`,
    ENTRY_PORT: '0',
    HTTP_HOST: '127.0.0.1',
    HTTP_PORT: String(httpPort),
  };
}

/** The identification line an SSH server sends first. */
function sshGreeting(port: number, host = '127.0.0.1'): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, host);
    socket.setTimeout(5_000, () => socket.destroy(new Error('no SSH greeting')));
    socket.once('data', (chunk) => {
      socket.destroy();
      resolve(chunk.toString('latin1'));
    });
    socket.once('error', reject);
  });
}

async function waitHealthy(url: string, deadlineMs = 15_000): Promise<any> {
  const deadline = Date.now() + deadlineMs;
  while (Date.now() < deadline) {
    try {
      const response = await fetch(`${url}/healthz`);
      return await response.json();
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  throw new Error('gateway did not answer');
}

describe('the gateway process (npm start)', {
  skip: !existsSync(main) && 'npm run build makes apps/gateway/dist/main.js',
}, () => {
  const dirs: string[] = [];
  after(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  const workdir = () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ccp-proc-'));
    dirs.push(dir);
    return dir;
  };

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`reads .env (the environment wins), serves, and stops cleanly on ${signal}`, async () => {
      const dir = workdir();
      const filePort = await freeLoopbackPort();
      const envPort = await freeLoopbackPort();
      const sshPort = await freeLoopbackPort();
      writeFileSync(
        path.join(dir, '.env'),
        `ADMIN_JWT_SECRET=${'k'.repeat(48)}\nADMIN_PASSWORD=first-admin-pass\nHTTP_PORT=${filePort}\n` +
          `HTTP_HOST=127.0.0.1\nENTRY_PORT=0\nDATA_DIR=${dir}/data\nDOCKER_SOCKET=${dir}/none.sock\n` +
          `SSH_PROXY_PORT=${sshPort}\n`,
      );
      const gateway = run(dir, { HTTP_PORT: String(envPort) });
      try {
        const health = await waitHealthy(`http://127.0.0.1:${envPort}`);
        assert.equal(health.checks.database, 'ok');
        const login = await fetch(`http://127.0.0.1:${envPort}/v1/auth/login`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ username: 'admin', password: 'first-admin-pass' }),
        });
        assert.equal(login.status, 200);
        assert.equal(statSync(path.join(dir, 'data/secrets.key')).mode & 0o777, 0o600);
        assert.match(await sshGreeting(sshPort), /^SSH-2\.0-/);
        gateway.child.kill(signal);
        assert.equal(await gateway.exit, 0, gateway.output());
        assert.match(gateway.output(), /"msg":"stopped"/);
        assert.doesNotMatch(gateway.output(), /first-admin-pass/);
        // PUBLIC_API_URL defaults to http://localhost:<port>: the loopback, which no network path carries.
        assert.doesNotMatch(gateway.output(), /is plain HTTP/);
        assert.doesNotMatch(gateway.output(), /node was started without/);
      } finally {
        gateway.child.kill('SIGKILL');
      }
    });
  }

  it('binds the SSH proxy to SSH_PROXY_HOST, the API staying on HTTP_HOST (behind a reverse proxy)', async () => {
    const dir = workdir();
    const [httpPort, sshPort] = [await freeLoopbackPort(), await freeLoopbackPort()];
    const gateway = run(dir, {
      ...settingsIn(dir, httpPort),
      SSH_PROXY_HOST: '127.0.0.2',
      SSH_PROXY_PORT: String(sshPort),
      PUBLIC_API_URL: `http://gw.example.test:${httpPort}`,
    });
    try {
      await waitHealthy(`http://127.0.0.1:${httpPort}`);
      // A public address in the clear: the administrator is told once, with what to do.
      const notices = gateway
        .output()
        .match(/PUBLIC_API_URL http:\/\/gw\.example\.test:\d+ is plain HTTP.*?nginx/g);
      assert.equal(notices?.length, 1, gateway.output());
      assert.match(await sshGreeting(sshPort, '127.0.0.2'), /^SSH-2\.0-/);
      await assert.rejects(sshGreeting(sshPort, '127.0.0.1'), /ECONNREFUSED/);
      await assert.rejects(
        fetch(`http://127.0.0.2:${httpPort}/healthz`),
        'the API is not on the SSH address',
      );
    } finally {
      gateway.child.kill('SIGKILL');
    }
  });

  it('started without the heap flags (a bare `node main.js`), says once which are missing and how to start it', async () => {
    const dir = workdir();
    const httpPort = await freeLoopbackPort();
    const settings = { ...settingsIn(dir, httpPort), SSH_PROXY_PORT: '0' };
    const bare = run(dir, settings, []);
    try {
      await waitHealthy(`http://127.0.0.1:${httpPort}`);
      const warnings = bare
        .output()
        .match(/node was started without --max-semi-space-size=1 --heap-growing-percent=100: .*?npm start/g);
      assert.equal(warnings?.length, 1, bare.output());
    } finally {
      bare.child.kill('SIGKILL');
      await bare.exit;
    }
    // A flag in NODE_OPTIONS (underscores are V8's too) counts as given; node refuses --heap-growing-percent there.
    const viaOptions = run(dir, { ...settings, NODE_OPTIONS: '--max_semi_space_size=1' }, [
      '--heap-growing-percent=100',
    ]);
    try {
      await waitHealthy(`http://127.0.0.1:${httpPort}`);
      assert.doesNotMatch(viaOptions.output(), /node was started without/);
    } finally {
      viaOptions.child.kill('SIGKILL');
    }
  });

  it('refuses to start without ADMIN_JWT_SECRET and says why', async () => {
    const dir = workdir();
    const gateway = run(dir, { DATA_DIR: dir });
    assert.equal(await gateway.exit, 78);
    assert.match(gateway.output(), /ADMIN_JWT_SECRET is required/);
  });
});
