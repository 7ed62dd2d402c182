/**
 * Getting ccp from the gateway in one line: the bundle, its checksum, and an install script that a real shell
 * (dash, Debian's /bin/sh, and bash) runs from a pipe, as the docs say.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import tls from 'node:tls';
import { loadConfig } from '../../src/config.js';
import { freeLoopbackPort } from '../../src/egress/loopback-ports.js';
import { GATEWAY_NAME, homeWithCurlrc, installCcp } from '../helpers/ccp-install.js';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');
const shells = ['dash', 'bash'].filter((shell) => spawnSync(shell, ['-c', 'true']).status === 0);

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
      const home = homeWithCurlrc(dir, shell);
      const run = await installCcp(shell, home, t.url);
      assert.equal(run.status, 0, run.stderr);
      const installed = path.join(home, '.local/bin/ccp');
      assert.equal(spawnSync(installed, ['--version'], { encoding: 'utf8' }).stdout.trim(), '9.9.9-test');
      assert.match(run.stdout, /ccp installed: .*\.local\/bin\/ccp \(9\.9\.9-test\)/);
      assert.match(run.stdout, /Add .*\.local\/bin to your PATH/);
      assert.match(run.stdout, new RegExp(`ccp init --gateway ${t.url.replaceAll('.', '\\.')}`));
      // It says what it checked and where to compare it; on the loopback there is nothing to warn about.
      assert.match(run.stdout, new RegExp(`Its SHA-256 checksum: ${sha256(readFileSync(bundle))}\n`));
      assert.match(run.stdout, /The portal shows the checksum .* "Install ccp" once you sign in/);
      assert.doesNotMatch(run.stderr, /WARNING/);
    });
  }

  it('installs nothing when the download does not match the checksum the script carries', async () => {
    const script = String((await t.request('GET', '/v1/cli/install', { token: null })).body);
    // The bundle changes after the script was fetched: what arrives is not what the script vouches for.
    writeFileSync(bundle, "#!/usr/bin/env node\nconsole.log('tampered');\n");
    const home = homeWithCurlrc(dir, 'tampered');
    const run = await installCcp('sh', home, t.url, script);
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

/** A home whose curl reaches `GATEWAY_NAME:port` on the loopback (and trusts `ca`, for the TLS front). */
const homeFor = (dir: string, label: string, port: number, ca?: string) =>
  homeWithCurlrc(dir, label, [
    `resolve = "${GATEWAY_NAME}:${port}:127.0.0.1"`,
    ...(ca ? [`cacert = "${ca}"`] : []),
  ]);

/** TLS in front of the gateway, as nginx would be: a certificate for GATEWAY_NAME, the bytes passed through. */
async function tlsFront(
  dir: string,
  upstreamPort: number,
): Promise<{ port: number; ca: string; close: () => void }> {
  const [key, cert] = [path.join(dir, 'tls.key'), path.join(dir, 'tls.crt')];
  const made = spawnSync('openssl', [
    ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1'],
    ...['-subj', `/CN=${GATEWAY_NAME}`, '-addext', `subjectAltName=DNS:${GATEWAY_NAME}`],
    ...['-keyout', key, '-out', cert],
  ]);
  assert.equal(made.status, 0, String(made.stderr));
  const server = tls.createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (socket) => {
    const upstream = net.connect(upstreamPort, '127.0.0.1');
    socket.pipe(upstream).pipe(socket);
    upstream.on('error', () => socket.destroy());
    socket.on('error', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as net.AddressInfo).port, ca: cert, close: () => server.close() };
}

describe('ccp fetched by users over a network', () => {
  let dir: string;
  let bundle: string;
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'ccp-cli-transport-'));
    bundle = path.join(dir, 'ccp.mjs');
    writeFileSync(bundle, "#!/usr/bin/env node\nconsole.log('9.9.9-test');\n");
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  describe('over plain HTTP', () => {
    let t: TestGateway;
    let port: number;
    let user: { token: string };
    before(async () => {
      port = await freeLoopbackPort();
      t = await startTestGateway(kind, {
        CLI_BUNDLE: bundle,
        HTTP_PORT: String(port),
        PUBLIC_HOST: GATEWAY_NAME,
        PUBLIC_API_URL: `http://${GATEWAY_NAME}:${port}`,
      });
      await t.listen();
      user = await t.createUser('installer');
    });
    after(() => t?.close());

    it('installs, but says first that the download is not protected and where to compare the checksum', async () => {
      const run = await installCcp('sh', homeFor(dir, 'http', port), `http://${GATEWAY_NAME}:${port}`);
      assert.equal(run.status, 0, run.stderr);
      assert.match(
        run.stderr,
        /^ccp install: WARNING: This gateway serves ccp over plain HTTP \(http:\/\/gw\.example\.test:\d+\): anyone on the network path can replace ccp together with the checksum/,
      );
      assert.match(run.stderr, /the one the portal shows after you sign in.*behind TLS \(https\)/);
      // The checksum the install printed is the one the signed-in portal shows.
      const release = await t.request('GET', '/v1/user/cli', { token: user.token });
      assert.equal(release.status, 200);
      assert.match(run.stdout, new RegExp(`Its SHA-256 checksum: ${release.body.sha256}\n`));
      assert.equal(release.body.transport, 'plain_http');
      assert.equal(
        `ccp install: WARNING: ${release.body.warning}\n`,
        run.stderr,
        'the portal warns in the same words',
      );
    });

    it('gives the checksum of the bytes it serves to signed-in users and admins, and to no one else', async () => {
      const served = Buffer.from(await (await fetch(`${t.url}/v1/cli/ccp.mjs`)).arrayBuffer());
      const forUser = await t.request('GET', '/v1/user/cli', { token: user.token });
      assert.equal(forUser.status, 200);
      assert.deepEqual(forUser.body, {
        file_name: 'ccp.mjs',
        sha256: sha256(served),
        download_url: `http://${GATEWAY_NAME}:${port}/v1/cli/ccp.mjs`,
        transport: 'plain_http',
        warning: forUser.body.warning,
      });
      const forAdmin = await t.request('GET', '/v1/admin/cli');
      assert.equal(forAdmin.status, 200);
      assert.equal(forAdmin.body.sha256, sha256(served));

      for (const route of ['/v1/user/cli', '/v1/admin/cli']) {
        const anonymous = await t.request('GET', route, { token: null });
        assert.equal(anonymous.status, 401, route);
        assert.equal(anonymous.body.code, 'unauthorized');
      }
      assert.equal((await t.request('GET', '/v1/admin/cli', { token: user.token })).status, 403);
      assert.equal((await t.request('GET', '/v1/user/cli')).status, 403, 'an admin token on the user path');
    });
  });

  describe('over TLS', () => {
    let t: TestGateway;
    let front: Awaited<ReturnType<typeof tlsFront>>;
    before(async () => {
      const port = await freeLoopbackPort();
      front = await tlsFront(dir, port);
      t = await startTestGateway(kind, {
        CLI_BUNDLE: bundle,
        HTTP_PORT: String(port),
        PUBLIC_HOST: GATEWAY_NAME,
        PUBLIC_API_URL: `https://${GATEWAY_NAME}:${front.port}`,
      });
      await t.listen();
    });
    after(async () => {
      await t?.close();
      front?.close();
    });

    it('installs without a warning', async () => {
      const home = homeFor(dir, 'https', front.port, front.ca);
      const run = await installCcp('sh', home, `https://${GATEWAY_NAME}:${front.port}`);
      assert.equal(run.status, 0, run.stderr);
      assert.equal(run.stderr, '');
      assert.match(run.stdout, new RegExp(`Its SHA-256 checksum: ${sha256(readFileSync(bundle))}\n`));
      const release = await t.request('GET', '/v1/admin/cli');
      assert.equal(release.body.transport, 'https');
      assert.equal(release.body.warning, null);
    });
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
