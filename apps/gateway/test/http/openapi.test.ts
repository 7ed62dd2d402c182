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

  it('names, summarises and groups every operation, and marks exactly the public ones as needing no token', async () => {
    const doc = (await t.request('GET', '/v1/openapi.json', { token: null })).body;
    const declared = new Map<string, string>(
      doc.tags.map((tag: { name: string; description: string }) => [tag.name, tag.description]),
    );
    for (const [name, description] of declared) assert.ok(description, `tag ${name} has no description`);
    const operations = Object.entries(
      doc.paths as Record<
        string,
        Record<string, { operationId: string; summary: string; tags: string[] } & object>
      >,
    ).flatMap(([route, methods]) =>
      Object.entries(methods).map(([method, op]) => ({ route, method, ...op })),
    );
    const ids = operations.map((op) => op.operationId);
    assert.deepEqual(
      ids.filter((id, i) => !/^[a-z][a-zA-Z0-9]*$/.test(id ?? '') || ids.indexOf(id) !== i),
      [],
      'operationIds missing, not camelCase or not unique',
    );
    for (const op of operations) {
      const name = `${op.method.toUpperCase()} ${op.route}`;
      assert.ok(op.summary, `${name} has no summary`);
      assert.ok(op.tags.length > 0 && op.tags.every((tag) => declared.has(tag)), `${name}: tags ${op.tags}`);
      // What the document says of a token, checked against what the route does without one.
      const url = op.route.replace(/\{\w+\}/g, '00000000-0000-4000-8000-000000000000');
      const { status } = await t.request(op.method.toUpperCase(), url, { token: null });
      const security = (op as { security?: unknown }).security;
      if (status === 401) assert.deepEqual(security, [{ bearer: [] }], `${name} needs a token`);
      else assert.deepEqual(security, [], `${name} answers ${status} without a token: it is public`);
    }
    assert.deepEqual(
      operations
        .filter((op) => (op as { security?: unknown[] }).security?.length === 0)
        .map((op) => op.route),
      [
        '/healthz',
        '/v1/auth/login',
        '/v1/admin/login',
        '/entry/{shortId}',
        '/v1/entry/{shortId}/auth',
        '/v1/entry/{shortId}/check',
        '/v1/bootstrap/script',
        '/v1/bootstrap/sessions',
        '/v1/bootstrap/tasks/{taskID}',
        '/v1/bootstrap/tasks/{taskID}/handoff',
        '/v1/cli/ccp.mjs',
        '/v1/cli/ccp.mjs.sha256',
        '/v1/cli/install',
        // The browser terminal's WebSocket: its credential is a one-time ticket in the address, not a token.
        '/v1/admin/hosts/{hostID}/terminal/ws',
        '/v1/user/hosts/{hostID}/terminal/ws',
      ],
    );
  });

  it('matches the committed docs (run npm run docs:api after changing a schema)', async () => {
    const served = (await t.request('GET', '/v1/openapi.json', { token: null })).body;
    const committed = JSON.parse(readFileSync(path.join(root, 'docs/api/openapi.json'), 'utf8'));
    assert.deepEqual(served, committed);
    assert.equal(readFileSync(path.join(root, 'docs/api-reference.md'), 'utf8'), renderMarkdown(served));
  });
});
