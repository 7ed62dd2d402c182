import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { createGateway, type Gateway } from '../../src/gateway.js';
import { createLogger } from '../../src/logger.js';
import { ADMIN_PASSWORD } from '../helpers/test-gateway.js';

describe('JSON logs carry the request id', () => {
  const lines: Record<string, unknown>[] = [];
  const dataDir = mkdtempSync(path.join(tmpdir(), 'ccp-logs-'));
  let gateway: Gateway;

  before(async () => {
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
    // The gateway's own logger (redaction, serializers) writing JSON lines to memory.
    const sink = new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
        done();
      },
    });
    const logger = createLogger(config, sink);
    gateway = await createGateway(config, { logger });
  });
  after(async () => {
    await gateway.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('every line the HTTP layer writes for a request has its id, the given one or a generated one', async () => {
    const login = await gateway.http.inject({
      method: 'POST',
      url: '/v1/auth/login',
      headers: { 'x-request-id': 'trace-abc.123' },
      payload: { username: 'admin', password: 'wrong-password' },
    });
    assert.equal(login.statusCode, 401);
    assert.equal(login.headers['x-request-id'], 'trace-abc.123');
    const own = lines.filter((line) => line.reqId === 'trace-abc.123');
    assert.ok(own.some((line) => line.msg === 'incoming request'));
    assert.ok(own.some((line) => line.msg === 'request completed' && (line.res as any)?.statusCode === 401));
    assert.doesNotMatch(JSON.stringify(lines), /wrong-password/);

    const missing = await gateway.http.inject({ url: '/v1/admin/users' });
    const generated = String(missing.headers['x-request-id']);
    assert.match(generated, /^[0-9a-f-]{36}$/);
    const http = lines.filter((line) => line.component === 'http');
    assert.ok(http.length >= 4);
    for (const line of http) assert.ok(typeof line.reqId === 'string' && line.reqId, JSON.stringify(line));
    assert.ok(http.some((line) => line.reqId === generated && line.msg === 'request completed'));
  });
});
