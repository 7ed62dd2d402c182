/**
 * Getting ccp from the gateway in one line: the bundle, its checksum, and an install script that a real shell
 * (dash, Debian's /bin/sh, and bash) runs from a pipe, as the docs say.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { freeLoopbackPort } from '../../src/egress/loopback-ports.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');
const shells = ['dash', 'bash'].filter((shell) => spawnSync(shell, ['-c', 'true']).status === 0);

/**
 * `curl -fsSL <url> | <shell>` with a home of its own; `script` replaces the download when given. Asynchronous:
 * the gateway answering curl runs in this process.
 */
function install(
  shell: string,
  home: string,
  url: string,
  script?: string,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const command = script === undefined ? `curl -fsSL '${url}/v1/cli/install' | ${shell}` : shell;
  return new Promise((resolve, reject) => {
    const child = spawn('sh', ['-c', command], {
      env: { PATH: process.env.PATH ?? '', HOME: home },
      stdio: ['pipe', 'pipe', 'pipe'],
      timeout: 60_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
    child.stdin.end(script ?? '');
  });
}

const kind = DATABASES[0]!;

describe('ccp served by the gateway', () => {
  let t: TestGateway;
  let dir: string;
  let bundle: string;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'ccp-cli-download-'));
    bundle = path.join(dir, 'ccp.mjs');
    writeFileSync(bundle, "#!/usr/bin/env node\nconsole.log('9.9.9-test');\n");
    const port = await freeLoopbackPort();
    t = await startTestGateway(kind, {
      CLI_BUNDLE: bundle,
      HTTP_PORT: String(port),
      PUBLIC_API_URL: `http://127.0.0.1:${port}`,
    });
    await t.listen();
  });
  after(async () => {
    await t?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('serves the bundle with its checksum, to anyone', async () => {
    const file = await t.request('GET', '/v1/cli/ccp.mjs', { token: null });
    assert.equal(file.status, 200);
    const digest = sha256(readFileSync(bundle));
    assert.equal(sha256(String(file.body)), digest);
    assert.equal(file.headers['x-checksum-sha256'], digest);
    const checksum = await t.request('GET', '/v1/cli/ccp.mjs.sha256', { token: null });
    assert.equal(checksum.body, `${digest}  ccp.mjs\n`);
  });

  for (const shell of shells) {
    it(`installs it with one line under ${shell}, checked against its checksum`, async () => {
      const home = mkdtempSync(path.join(dir, `home-${shell}-`));
      const run = await install(shell, home, t.url);
      assert.equal(run.status, 0, run.stderr);
      const installed = path.join(home, '.local/bin/ccp');
      assert.equal(spawnSync(installed, ['--version'], { encoding: 'utf8' }).stdout.trim(), '9.9.9-test');
      assert.match(run.stdout, /ccp installed: .*\.local\/bin\/ccp \(9\.9\.9-test\)/);
      assert.match(run.stdout, /Add .*\.local\/bin to your PATH/);
      assert.match(run.stdout, new RegExp(`ccp init --gateway ${t.url.replaceAll('.', '\\.')}`));
    });
  }

  it('installs nothing when the download does not match the checksum the script carries', async () => {
    const script = String((await t.request('GET', '/v1/cli/install', { token: null })).body);
    // The bundle changes after the script was fetched: what arrives is not what the script vouches for.
    writeFileSync(bundle, "#!/usr/bin/env node\nconsole.log('tampered');\n");
    const home = mkdtempSync(path.join(dir, 'home-tampered-'));
    const run = await install('sh', home, t.url, script);
    assert.equal(run.status, 3, run.stderr);
    assert.match(run.stderr, /does not match its checksum.*nothing was installed/);
    assert.equal(existsSync(path.join(home, '.local/bin/ccp')), false);
    assert.deepEqual(readdirSync(path.join(home, '.local/bin')), [], 'no partial download is left');
  });

  it('answers 404 with a reason when the gateway was built without the bundle', async () => {
    rmSync(bundle);
    const file = await t.request('GET', '/v1/cli/ccp.mjs', { token: null });
    assert.equal(file.status, 404);
    assert.equal(file.body.code, 'cli_unavailable');
    assert.match(file.body.error, /npm run build/);
  });
});

describe('the bundle this checkout builds', {
  skip:
    !existsSync(loadConfig({ ADMIN_JWT_SECRET: 'x'.repeat(48) }).cliBundle) &&
    'npm run build makes apps/cli/dist/ccp.mjs',
}, () => {
  it('is what the gateway serves by default, and runs', async () => {
    const t = await startTestGateway(kind);
    try {
      const file = await t.request('GET', '/v1/cli/ccp.mjs', { token: null });
      assert.equal(file.status, 200);
      const dir = mkdtempSync(path.join(tmpdir(), 'ccp-bundle-'));
      try {
        const copy = path.join(dir, 'ccp.mjs');
        writeFileSync(copy, String(file.body));
        const version = spawnSync(process.execPath, [copy, '--version'], { encoding: 'utf8' });
        assert.equal(version.status, 0, version.stderr);
        assert.match(version.stdout, /^\d+\.\d+\.\d+/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    } finally {
      await t.close();
    }
  });
});
