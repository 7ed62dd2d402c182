import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { renderMarkdown } from '../../../../scripts/generate-api-docs.js';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const root = path.resolve(import.meta.dirname, '../../../..');

describe('OpenAPI document and generated API reference', () => {
  let t: TestGateway;
  before(async () => {
    t = await startTestGateway('sqlite');
  });
  after(() => t.close());

  it('is served at /v1/openapi.json without a token and documents every route', async () => {
    const response = await t.request('GET', '/v1/openapi.json', { token: null });
    assert.equal(response.status, 200);
    const paths = Object.keys(response.body.paths);
    for (const route of [
      '/healthz',
      '/v1/auth/login',
      '/v1/admin/users/{userID}/ssh-keys/generate',
      '/v1/user/sse',
    ]) {
      assert.ok(paths.includes(route), route);
    }
    assert.deepEqual(response.body.paths['/v1/admin/users'].get.security, [{ bearer: [] }]);
  });

  it('matches the committed docs (run npm run docs:api after changing a schema)', async () => {
    const served = (await t.request('GET', '/v1/openapi.json', { token: null })).body;
    const committed = JSON.parse(readFileSync(path.join(root, 'docs/api/openapi.json'), 'utf8'));
    assert.deepEqual(served, committed);
    assert.equal(readFileSync(path.join(root, 'docs/api-reference.md'), 'utf8'), renderMarkdown(served));
  });
});
