import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

/** The access command pipes the entry script to `sh`: over plain HTTP anyone on the path could rewrite it. */
describe('attack: an entry script fetched over plain HTTP from a gateway behind TLS', () => {
  let t: TestGateway;
  before(async () => {
    t = await startTestGateway('sqlite', {
      PUBLIC_HOST: 'gw.example.test',
      PUBLIC_API_URL: 'https://gw.example.test',
    });
  });
  after(() => t.close());

  it('publishes an https access command when the API is https', async () => {
    const user = await t.createUser('tlsuser');
    const host = await t.request('POST', '/v1/admin/hosts', { body: { user_id: user.id } });
    assert.equal(host.status, 201, JSON.stringify(host.body));
    assert.equal(
      host.body.access_command,
      `curl -fsSL https://gw.example.test/entry/${host.body.short_id} | sh`,
    );
  });

  it('refuses to start with an http entry URL beside an https API', () => {
    const base = {
      ADMIN_JWT_SECRET: 'x'.repeat(48),
      DATA_DIR: '/tmp/unused',
      PUBLIC_API_URL: 'https://gw.example.test',
    };
    assert.throws(
      () => loadConfig({ ...base, PUBLIC_ENTRY_URL: 'http://gw.example.test' }),
      /PUBLIC_ENTRY_URL must be an https:\/\/ URL when PUBLIC_API_URL is/,
    );
  });
});
