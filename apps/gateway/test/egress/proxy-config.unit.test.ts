import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MASKED_SECRET, ProxyConfig } from '@ccp/api';
import Value from 'typebox/value';
import { maskProxyConfig, mergeMaskedSecrets, validateProxyConfig } from '../../src/egress/proxy-config.js';
import { UUID, VARIANTS } from './variants.js';

const vless = { type: 'vless', server: 'exit1.example.test', server_port: 443, uuid: UUID };
const vmess = { type: 'vmess', server: '198.51.100.21', server_port: 10086, uuid: UUID };
const trojan = {
  type: 'trojan',
  server: 'exit1.example.test',
  server_port: 443,
  password: 'trpass',
  tls: { enabled: true, server_name: 'exit1.example.test' },
};
const ss = {
  type: 'shadowsocks',
  server: '198.51.100.21',
  server_port: 8388,
  method: 'aes-256-gcm',
  password: 'p',
};
const socks = { type: 'socks', server: '198.51.100.21', server_port: 1080 };
const http = { type: 'http', server: 'proxy.example.test', server_port: 3128 };

/** Asserts the config is refused and that `field` is among the fields named (with a message matching `message`). */
function assertRejected(input: unknown, field: string, message?: RegExp) {
  const result = validateProxyConfig(input);
  assert.equal(result.ok, false, `expected ${JSON.stringify(input)} to be rejected`);
  if (result.ok) return;
  const problem = result.problems.find((p) => p.field === field);
  assert.ok(problem, `no problem for ${field}; got ${JSON.stringify(result.problems)}`);
  if (message) assert.match(problem.message, message);
}

function assertAccepted(input: unknown) {
  const result = validateProxyConfig(input);
  assert.ok(result.ok, JSON.stringify(!result.ok && result.problems));
  assert.deepEqual(result.value, input, 'the accepted value is the input, nothing added or dropped');
  assert.ok(Value.Check(ProxyConfig, result.value), 'the value matches the API schema');
}

describe('validateProxyConfig: accepted', () => {
  for (const { name, upstream } of VARIANTS) {
    it(name, () => assertAccepted(upstream.config));
  }

  it('IPv6 literal, trailing-dot host name, port bounds', () => {
    assertAccepted({ ...socks, server: '2001:db8::21' });
    assertAccepted({ ...socks, server: 'exit1.example.test.', server_port: 1 });
    assertAccepted({ ...socks, server_port: 65535 });
  });

  it('vmess with every security v2ray 4.34 has, and a legacy alter_id', () => {
    for (const security of ['auto', 'none', 'zero', 'aes-128-gcm', 'chacha20-poly1305']) {
      assertAccepted({ ...vmess, security });
    }
    assertAccepted({ ...vmess, alter_id: 64 });
  });

  it('plain http without TLS, and TLS switched off', () => {
    assertAccepted(http);
    assertAccepted({ ...http, tls: { enabled: false } });
  });
});

describe('validateProxyConfig: shape', () => {
  it('needs an object', () => {
    for (const input of [null, 'socks', 42, [socks]]) assertRejected(input, 'proxy_config', /object/);
  });

  it('needs a known type', () => {
    assertRejected({ server: 'a.example.test', server_port: 1 }, 'proxy_config.type', /required/);
    for (const type of ['hysteria2', 'wireguard', 'tuic', 'SOCKS', 5]) {
      assertRejected({ ...socks, type }, 'proxy_config.type', /one of socks, http/);
    }
  });

  it('needs a host name or IP literal as server', () => {
    assertRejected({ type: 'socks', server_port: 1 }, 'proxy_config.server', /required/);
    for (const server of [
      '',
      ' exit1.example.test',
      'exit_1.example.test',
      '-a.example.test',
      '[2001:db8::1]',
      7,
    ]) {
      assertRejected({ ...socks, server }, 'proxy_config.server', /host name or an IP/);
    }
    assertRejected({ ...socks, server: `${'a'.repeat(64)}.example.test` }, 'proxy_config.server');
  });

  it('needs server_port to be an integer from 1 to 65535', () => {
    assertRejected({ type: 'socks', server: 'a.example.test' }, 'proxy_config.server_port', /required/);
    for (const port of [0, 65536, -1, 1.5, '443', null]) {
      assertRejected({ ...socks, server_port: port }, 'proxy_config.server_port', /1 to 65535/);
    }
  });

  it('names every bad field at once', () => {
    const result = validateProxyConfig({
      type: 'vless',
      server: '',
      server_port: 0,
      flow: 'xtls-rprx-vision',
    });
    assert.equal(result.ok, false);
    assert.deepEqual(!result.ok && result.problems.map((p) => p.field).sort(), [
      'proxy_config.flow',
      'proxy_config.server',
      'proxy_config.server_port',
      'proxy_config.uuid',
    ]);
  });

  it('rejects unknown fields anywhere', () => {
    assertRejected({ ...socks, tag: 'out' }, 'proxy_config.tag', /unknown field/);
    assertRejected({ ...socks, dns_server: '1.1.1.1' }, 'proxy_config.dns_server', /unknown field/);
    assertRejected({ ...ss, tls: { enabled: true } }, 'proxy_config.tls', /unknown field/);
    assertRejected({ ...trojan, tls: { ...trojan.tls, foo: 1 } }, 'proxy_config.tls.foo', /unknown field/);
    assertRejected(
      { ...vless, transport: { type: 'ws', path: '/', bar: true } },
      'proxy_config.transport.bar',
      /unknown field/,
    );
  });
});

describe('validateProxyConfig: per type', () => {
  it('socks: version 5 only, credentials together', () => {
    assertAccepted({ ...socks, version: '5', username: 'u', password: 'p' });
    for (const version of ['4', '4a'])
      assertRejected({ ...socks, version }, 'proxy_config.version', /SOCKS4/);
    assertRejected({ ...socks, version: 5 }, 'proxy_config.version', /"5"/);
    assertRejected({ ...socks, username: 'u' }, 'proxy_config.password', /together/);
    assertRejected({ ...socks, password: 'p' }, 'proxy_config.username', /together/);
    assertRejected({ ...socks, username: 'u', password: 'p'.repeat(256) }, 'proxy_config.password', /255/);
    assertRejected({ ...socks, udp_over_tcp: true }, 'proxy_config.udp_over_tcp', /not supported/);
  });

  it('http: credentials, TLS, no path or headers', () => {
    assertAccepted({ ...http, username: 'u', password: 'p', tls: { enabled: true, insecure: true } });
    assertRejected({ ...http, username: 'a:b', password: 'p' }, 'proxy_config.username', /":"/);
    assertRejected({ ...http, username: '', password: 'p' }, 'proxy_config.username', /non-empty/);
    assertRejected({ ...http, path: '/proxy' }, 'proxy_config.path', /not supported/);
    assertRejected({ ...http, headers: { 'X-A': 'b' } }, 'proxy_config.headers', /not supported/);
    assertRejected({ ...http, tls: true }, 'proxy_config.tls', /object/);
    assertRejected({ ...http, tls: {} }, 'proxy_config.tls.enabled', /required/);
  });

  it('shadowsocks: AEAD methods only, no plugins', () => {
    const { method: _, ...noMethod } = ss;
    assertRejected(noMethod, 'proxy_config.method', /required/);
    assertRejected({ ...ss, password: undefined }, 'proxy_config.password', /required/);
    for (const method of [
      '2022-blake3-aes-128-gcm',
      '2022-blake3-aes-256-gcm',
      '2022-blake3-chacha20-poly1305',
    ]) {
      assertRejected({ ...ss, method }, 'proxy_config.method', /Shadowsocks-2022/);
    }
    for (const method of [
      'aes-256-cfb',
      'aes-128-ctr',
      'rc4-md5',
      'chacha20-ietf',
      'xchacha20-ietf-poly1305',
      'none',
    ]) {
      assertRejected({ ...ss, method }, 'proxy_config.method', /AEAD/);
    }
    assertRejected({ ...ss, plugin: 'obfs-local' }, 'proxy_config.plugin', /plugins/);
    assertRejected({ ...ss, plugin_opts: 'obfs=http' }, 'proxy_config.plugin_opts', /plugins/);
    assertRejected({ ...ss, multiplex: { enabled: true } }, 'proxy_config.multiplex', /multiplex/);
  });

  it('vmess: uuid, security, alter_id', () => {
    const { uuid: _, ...noUuid } = vmess;
    assertRejected(noUuid, 'proxy_config.uuid', /required/);
    assertRejected({ ...vmess, uuid: 'not-a-uuid' }, 'proxy_config.uuid', /UUID/);
    assertRejected({ ...vmess, security: 'aes-128-ctr' }, 'proxy_config.security', /fall back to auto/);
    assertRejected({ ...vmess, security: 'rot13' }, 'proxy_config.security', /one of/);
    for (const alterId of [-1, 1.5, '0', 65536]) {
      assertRejected({ ...vmess, alter_id: alterId }, 'proxy_config.alter_id', /integer/);
    }
    for (const field of ['packet_encoding', 'authenticated_length', 'global_padding', 'multiplex']) {
      assertRejected({ ...vmess, [field]: 'x' }, `proxy_config.${field}`, /not supported/);
    }
  });

  it('vless: uuid, no flow', () => {
    assertRejected({ ...vless, uuid: undefined }, 'proxy_config.uuid', /required/);
    for (const flow of ['xtls-rprx-vision', '']) {
      assertRejected({ ...vless, flow }, 'proxy_config.flow', /flow/);
    }
    assertRejected({ ...vless, packet_encoding: 'xudp' }, 'proxy_config.packet_encoding', /not supported/);
  });

  it('trojan: password and TLS required', () => {
    assertRejected({ ...trojan, password: undefined }, 'proxy_config.password', /required/);
    const { tls: _, ...noTls } = trojan;
    assertRejected(noTls, 'proxy_config.tls', /required/);
    assertRejected({ ...trojan, tls: { enabled: false } }, 'proxy_config.tls.enabled', /must be true/);
    assertAccepted({ ...trojan, transport: { type: 'ws', path: '/tr' } });
  });
});

describe('validateProxyConfig: TLS and transport features v2ray 4.34 lacks', () => {
  const tls = { enabled: true, server_name: 'exit1.example.test' };

  it('REALITY, uTLS, ECH and other TLS knobs', () => {
    const cases: [string, unknown, RegExp][] = [
      ['reality', { enabled: true, public_key: 'k', short_id: '01' }, /REALITY/],
      ['utls', { enabled: true, fingerprint: 'chrome' }, /uTLS/],
      ['ech', { enabled: true }, /ECH/],
      ['disable_sni', true, /not supported/],
      ['min_version', '1.3', /not supported/],
      ['certificate_path', '/etc/ca.pem', /PEM text/],
    ];
    for (const [field, value, message] of cases) {
      assertRejected({ ...vless, tls: { ...tls, [field]: value } }, `proxy_config.tls.${field}`, message);
    }
  });

  it('checks the TLS fields it does support', () => {
    assertRejected(
      { ...vless, tls: { ...tls, enabled: 'yes' } },
      'proxy_config.tls.enabled',
      /true or false/,
    );
    assertRejected({ ...vless, tls: { ...tls, server_name: 'bad name' } }, 'proxy_config.tls.server_name');
    assertRejected({ ...vless, tls: { ...tls, insecure: 1 } }, 'proxy_config.tls.insecure');
    assertRejected({ ...vless, tls: { ...tls, alpn: 'h2' } }, 'proxy_config.tls.alpn');
    assertRejected(
      { ...vless, tls: { ...tls, certificate: 'MIIB...' } },
      'proxy_config.tls.certificate',
      /PEM/,
    );
  });

  it('only the ws transport, without early data', () => {
    for (const type of ['grpc', 'http', 'quic', 'httpupgrade']) {
      assertRejected({ ...vless, transport: { type } }, 'proxy_config.transport.type', /only ws/);
    }
    assertRejected({ ...vless, transport: { type: 'kcp' } }, 'proxy_config.transport.type', /"ws"/);
    assertRejected({ ...vless, transport: 'ws' }, 'proxy_config.transport', /object/);
    assertRejected(
      { ...vless, transport: { type: 'ws', max_early_data: 2048 } },
      'proxy_config.transport.max_early_data',
      /early data/,
    );
    assertRejected(
      { ...vless, transport: { type: 'ws', path: 'vl' } },
      'proxy_config.transport.path',
      /start with/,
    );
    assertRejected(
      { ...vless, transport: { type: 'ws', headers: { Host: ['a', 'b'] } } },
      'proxy_config.transport.headers.Host',
      /single-line/,
    );
    assertRejected(
      { ...vless, transport: { type: 'ws', headers: { 'Bad Header': 'x' } } },
      'proxy_config.transport.headers.Bad Header',
      /header name/,
    );
  });
});

describe('masking and merging secrets', () => {
  it('masks password and uuid, nothing else', () => {
    const config = { ...trojan } as ProxyConfig;
    assert.deepEqual(maskProxyConfig(config), { ...trojan, password: MASKED_SECRET });
    assert.deepEqual(maskProxyConfig(vmess as ProxyConfig), { ...vmess, uuid: MASKED_SECRET });
    assert.deepEqual(maskProxyConfig(socks as ProxyConfig), socks, 'no secret, nothing masked');
    const withAuth = { ...socks, username: 'u', password: 'p' } as ProxyConfig;
    assert.deepEqual(maskProxyConfig(withAuth), { ...socks, username: 'u', password: MASKED_SECRET });
    assert.equal((withAuth as { password: string }).password, 'p', 'the stored config is not modified');
  });

  it('keeps every stored secret a masked update sends back', () => {
    for (const { upstream } of VARIANTS) {
      const masked = maskProxyConfig(upstream.config);
      const merged = mergeMaskedSecrets(masked, upstream.config);
      assert.deepEqual(merged, { ok: true, value: upstream.config });
      assert.ok(merged.ok && validateProxyConfig(merged.value).ok);
    }
  });

  it('takes new secrets and other changes as sent', () => {
    const stored = vmess as ProxyConfig;
    const other = '11111111-2222-4333-8444-555555555555';
    assert.deepEqual(mergeMaskedSecrets({ ...vmess, uuid: other }, stored), {
      ok: true,
      value: { ...vmess, uuid: other },
    });
    assert.deepEqual(mergeMaskedSecrets({ ...vmess, uuid: other, server_port: 1 }, stored), {
      ok: true,
      value: { ...vmess, uuid: other, server_port: 1 },
    });
    assert.deepEqual(mergeMaskedSecrets({ ...vmess, uuid: MASKED_SECRET, security: 'none' }, stored), {
      ok: true,
      value: { ...vmess, security: 'none' },
    });
    assert.deepEqual(mergeMaskedSecrets('not an object', stored), { ok: true, value: 'not an object' });
  });

  it('refuses a mask once type, server or server_port changed: the secret must be sent again', () => {
    const stored = vmess as ProxyConfig;
    for (const [changed, incoming] of [
      ['server_port', { ...vmess, uuid: MASKED_SECRET, server_port: 1 }],
      ['server', { ...vmess, uuid: MASKED_SECRET, server: 'elsewhere.example.test' }],
      ['type', { ...vless, server: vmess.server, server_port: vmess.server_port, uuid: MASKED_SECRET }],
      ['server, server_port', { ...vmess, uuid: MASKED_SECRET, server: '203.0.113.9', server_port: 2 }],
    ] as const) {
      const merged = mergeMaskedSecrets(incoming, stored);
      assert.equal(merged.ok, false, changed);
      if (merged.ok) continue;
      assert.deepEqual(
        merged.problems.map((p) => p.field),
        ['proxy_config.uuid'],
      );
      assert.match(merged.problems[0]!.message, new RegExp(`${changed} changed`));
      assert.match(merged.problems[0]!.message, /send the secret again when the server changes/);
    }
  });

  it('refuses a mask with nothing stored behind it', () => {
    const merged = mergeMaskedSecrets({ ...socks, password: MASKED_SECRET }, socks as ProxyConfig);
    assert.ok(merged.ok);
    assertRejected(merged.value, 'proxy_config.password', /masked placeholder/);
    assertRejected({ ...vless, uuid: MASKED_SECRET }, 'proxy_config.uuid', /masked placeholder/);
  });
});
