import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DATABASES, startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

for (const kind of DATABASES) {
  describe(`health and errors (${kind})`, () => {
    let t: TestGateway;
    before(async () => {
      t = await startTestGateway(kind);
    });
    after(() => t.close());

    it('reports the database ok and the missing container engine as degraded', async () => {
      const response = await t.request('GET', '/healthz', { token: null });
      assert.equal(response.status, 503);
      assert.equal(response.body.status, 'degraded');
      assert.equal(response.body.checks.database, 'ok');
      assert.match(response.body.checks.agent, /not running/);
    });

    it('answers unknown routes with a JSON 404', async () => {
      const response = await t.request('GET', '/v1/nothing-here', { token: null });
      assert.equal(response.status, 404);
      assert.deepEqual(response.body, { error: 'No route for GET /v1/nothing-here', code: 'not_found' });
    });
  });
}
