import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { createGateway } from '../../src/gateway.js';
import { createLogger } from '../../src/logger.js';
import { assertError } from '../helpers/expect.js';
import { SseClient } from '../helpers/sse-client.js';
import { ADMIN_PASSWORD, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/** Tokens in URLs end up in proxy and access logs: the API takes them only where a browser has no header. */
describe('attack: an API token in the query string', () => {
  let t: TestGateway;
  before(async () => {
    t = await startTestGateway('sqlite');
    await t.listen();
  });
  after(() => t.close());

  it('is refused on admin and user routes, and on the desktop, with a 401 that says to use the header', async () => {
    const user = await t.createUser('urluser');
    const someHost = randomUUID();
    for (const [url, token] of [
      ['/v1/admin/users', t.adminToken],
      ['/v1/user/ssh-keys', user.token],
      ['/v1/user/hosts', user.token],
      // The desktop takes a one-time ticket in its URL, never the API token (attacks/desktop-credentials).
      [`/v1/admin/hosts/${someHost}/vnc/vnc.html`, t.adminToken],
      [`/v1/user/hosts/${someHost}/vnc/vnc.html`, user.token],
    ] as const) {
      const response = await t.request('GET', `${url}?token=${encodeURIComponent(token)}`, { token: null });
      const body = assertError(response, 401, 'unauthorized');
      assert.match(body.error, /Authorization header/);
    }
  });

  it('still opens the SSE streams, where a browser cannot send a header', async () => {
    const client = await SseClient.open(`${t.url}/v1/admin/sse?token=${encodeURIComponent(t.adminToken)}`);
    try {
      assert.equal(client.status, 200);
      await client.waitFor((c) =>
        c.frames.some((f) => f.comment === ' connected' || f.comment === 'connected'),
      );
    } finally {
      client.close();
    }
  });
});

describe('attack: reading tokens out of the request log', () => {
  it('never writes a token, a desktop ticket or a desktop pass from a URL, however its name is spelled', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'ccp-token-log-'));
    const config = loadConfig({
      ADMIN_JWT_SECRET: randomBytes(36).toString('base64'),
      ADMIN_PASSWORD,
      DATA_DIR: dataDir,
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: '0',
      SSH_PROXY_PORT: '0',
      DOCKER_SOCKET: path.join(dataDir, 'no-engine.sock'),
      LOG_FORMAT: 'json',
    });
    let written = '';
    const sink = new Writable({
      write(chunk, _encoding, done) {
        written += String(chunk);
        done();
      },
    });
    const gateway = await createGateway(config, { logger: createLogger(config, sink) });
    try {
      const secret = 'eyJhbGciOiJIUzI1NiJ9.secret-part.signature';
      for (const query of [
        `token=${secret}`,
        `topics=hosts&token=${secret}`,
        `%74oken=${secret}`,
        `TOKEN=${secret}`,
      ])
        await gateway.http.inject({ url: `/v1/admin/sse?${query}` });
      for (const query of [`ticket=${secret}`, `autoconnect=true&%74icket=${secret}`])
        await gateway.http.inject({ url: `/v1/admin/hosts/${randomUUID()}/vnc/vnc.html?${query}` });
      // A desktop pass in the path, and in the viewer's `path=` naming its stream.
      const passBase = `v1/admin/hosts/${randomUUID()}/vnc/pass/${secret}`;
      await gateway.http.inject({
        url: `/${passBase}/vnc.html?autoconnect=true&path=${passBase}/websockify`,
      });
      await gateway.http.inject({ url: `/${passBase}/websockify` });
      assert.match(written, /incoming request/);
      assert.doesNotMatch(written, /secret-part/);
    } finally {
      await gateway.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
