import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ChangePasswordRequest, CreateUserRequest, EventQuery, MASKED_SECRET, ProxyConfig } from '@ccp/api';
import { Value } from 'typebox/value';
import { initialValues, toProxyConfig, validateEgress } from '../src/pages/admin/egress-config.js';
import { validate } from '../src/validation.js';

const egress = (overrides: Partial<ReturnType<typeof initialValues>>) => ({
  ...initialValues(),
  label: 'exit one',
  ip_address: '203.0.113.7',
  server: 'proxy.example.net',
  server_port: '1080',
  ...overrides,
});

describe('user form validation', () => {
  it('names each bad field with the rule the API applies', () => {
    const errors = validate(CreateUserRequest, { username: '-x', password: 'short', expires_at: null });
    assert.match(errors.username!, /3 to 50 characters/);
    assert.equal(errors.password, 'At least 8 characters');
    assert.equal(errors.expires_at, undefined);
  });

  it('accepts a valid user and rejects a malformed expiry', () => {
    assert.deepEqual(validate(CreateUserRequest, { username: 'ada.l', password: 'long enough' }), {});
    const errors = validate(CreateUserRequest, {
      username: 'ada',
      password: 'long enough',
      expires_at: 'soon',
    });
    assert.equal(errors.expires_at, 'Not a valid date and time');
  });

  it('requires both passwords when changing one, and a long new one', () => {
    const errors = validate(ChangePasswordRequest, { old_password: '', new_password: 'abc' });
    assert.equal(errors.old_password, 'Required');
    assert.equal(errors.new_password, 'At least 8 characters');
  });

  it('checks event filters the way the API does', () => {
    const errors = validate(EventQuery, { user_id: 'not-a-uuid', type: 'host.started' });
    assert.equal(errors.user_id, 'Not a valid UUID');
    assert.equal(errors.type, undefined);
  });
});

describe('egress IP form', () => {
  it('sends only the fields of the chosen protocol', () => {
    const values = egress({
      type: 'shadowsocks',
      username: 'left over',
      secret: 's3cret',
      tls: true,
      ws: true,
    });
    assert.deepEqual(toProxyConfig(values, false), {
      type: 'shadowsocks',
      server: 'proxy.example.net',
      server_port: 1080,
      method: 'aes-128-gcm',
      password: 's3cret',
    });
    const trojan = toProxyConfig(
      egress({ type: 'trojan', secret: 'pw', tls_server_name: 'exit.example' }),
      false,
    );
    assert.deepEqual(trojan.type === 'trojan' && trojan.tls, { enabled: true, server_name: 'exit.example' });
    assert.ok(Value.Check(ProxyConfig, trojan));
  });

  it('reports missing and out-of-range fields under the API field names', () => {
    const errors = validateEgress(
      egress({ type: 'vmess', label: '', server_port: '70000', ip_address: '1.2.3' }),
      false,
    );
    assert.equal(errors.label, 'Required');
    assert.equal(errors['proxy_config.server_port'], 'A port from 1 to 65535');
    assert.equal(errors['proxy_config.uuid'], 'Required');
    assert.match(errors.ip_address!, /Not a valid/);
  });

  it('keeps a stored secret when editing leaves it empty', () => {
    const existing = {
      id: '00000000-0000-4000-8000-000000000001',
      label: 'exit',
      ip_address: '203.0.113.7',
      tunnel_type: 'proxy' as const,
      provider: 'manual',
      proxy_config: {
        type: 'socks' as const,
        server: 'proxy.example.net',
        server_port: 1080,
        username: 'u',
        password: MASKED_SECRET,
      },
      bound_host_ids: [],
      last_test: null,
      created_at: '2026-01-01T00:00:00.000Z',
      updated_at: '2026-01-01T00:00:00.000Z',
    };
    const values = initialValues(existing);
    assert.equal(values.secret, '', 'a secret is never put back into the form');
    assert.deepEqual(validateEgress(values, true), {});
    assert.equal((toProxyConfig(values, true) as { password?: string }).password, MASKED_SECRET);
    assert.equal(
      (toProxyConfig({ ...values, secret: 'new' }, true) as { password?: string }).password,
      'new',
    );
  });

  it('leaves optional SOCKS credentials out when empty', () => {
    assert.deepEqual(validateEgress(egress({ type: 'socks' }), false), {});
    assert.deepEqual(toProxyConfig(egress({ type: 'socks' }), false), {
      type: 'socks',
      server: 'proxy.example.net',
      server_port: 1080,
    });
  });
});
