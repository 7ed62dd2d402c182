import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DASHBOARD_CSP } from '../../src/http/plugins/security-headers.js';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/** Hardening issue, point 8: what a browser is told about the dashboard's and the API's answers. */
describe('security headers on the dashboard and the API', () => {
  let t: TestGateway;
  before(async () => {
    // The test's own client is the trusted proxy, so it can say the request came over TLS.
    t = await startTestGateway('sqlite', { TRUST_PROXY: '127.0.0.1' });
    await t.listen();
  });
  after(() => t?.close());

  it('an API answer loads nothing, is framed nowhere, is never sniffed and sends no Referer', async () => {
    const response = await fetch(`${t.url}/v1/openapi.json`);
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(response.headers.get('referrer-policy'), 'no-referrer');
    assert.match(
      response.headers.get('content-security-policy') ?? '',
      /default-src 'none'.*frame-ancestors 'none'/,
    );
    assert.equal(response.headers.get('x-frame-options'), 'DENY');
    // An error answer too.
    const refused = await fetch(`${t.url}/v1/admin/users`);
    assert.equal(refused.status, 401);
    assert.match(refused.headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/);
  });

  it("the dashboard's page runs only its own scripts and is framed nowhere", async (context) => {
    const page = await fetch(`${t.url}/admin/users`);
    if (page.status === 404) return context.skip('the dashboard is not built (npm run build)');
    assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
    assert.equal(page.headers.get('content-security-policy'), DASHBOARD_CSP);
    assert.doesNotMatch(DASHBOARD_CSP, /unsafe-inline|unsafe-eval/);
  });

  it('HSTS only for a request that came over TLS', async () => {
    const plain = await fetch(`${t.url}/healthz`);
    assert.equal(plain.headers.get('strict-transport-security'), null);
    const overTls = await fetch(`${t.url}/healthz`, { headers: { 'x-forwarded-proto': 'https' } });
    assert.equal(overTls.headers.get('strict-transport-security'), 'max-age=31536000');
  });
});
