import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { renderMarkdown } from '../../../../scripts/generate-api-docs.js';
import { registeredRoutes, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

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
    const documented = new Set(
      Object.entries(response.body.paths as Record<string, Record<string, unknown>>).flatMap(
        ([route, methods]) => Object.keys(methods).map((method) => `${method.toUpperCase()} ${route}`),
      ),
    );
    const registered = new Set(
      registeredRoutes(t.gateway.http)
        // HEAD comes with every GET by itself.
        .filter(({ method }) => method !== 'HEAD')
        .map(({ method, url }) => `${method} ${url.replace(/:(\w+)/g, '{$1}')}`),
    );
    // Left out on purpose: the document itself, Prometheus' endpoint, the dashboard's pages (when built) and the
    // desktop's web client (files and a WebSocket relayed from the workspace, not an API).
    const hidden = [
      /^GET \/v1\/openapi\.json$/,
      /^GET \/metrics$/,
      /^GET \/\*$/,
      // The built dashboard's files, one route each (@fastify/static).
      /^GET \/(index\.html|assets\/.+)?$/,
      /^GET \/v1\/(admin|user)\/hosts\/\{hostID\}\/vnc\/\*$/,
    ];
    const undocumented = [...registered].filter(
      (route) => !documented.has(route) && !hidden.some((pattern) => pattern.test(route)),
    );
    assert.deepEqual(undocumented, [], 'registered routes missing from the document');
    const unregistered = [...documented].filter((route) => !registered.has(route));
    assert.deepEqual(unregistered, [], 'documented routes nobody serves');
    assert.ok(documented.size > 50, `only ${documented.size} routes documented`);
    assert.deepEqual(response.body.paths['/v1/admin/users'].get.security, [{ bearer: [] }]);
  });

  it('matches the committed docs (run npm run docs:api after changing a schema)', async () => {
    const served = (await t.request('GET', '/v1/openapi.json', { token: null })).body;
    const committed = JSON.parse(readFileSync(path.join(root, 'docs/api/openapi.json'), 'utf8'));
    assert.deepEqual(served, committed);
    assert.equal(readFileSync(path.join(root, 'docs/api-reference.md'), 'utf8'), renderMarkdown(served));
  });
});
