import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig, parseDuration, readEnvironment } from '../src/config.js';

const secret = 's'.repeat(48);

describe('configuration', () => {
  it('has the documented defaults', () => {
    const config = loadConfig({ ADMIN_JWT_SECRET: secret });
    assert.equal(config.httpPort, 8080);
    assert.equal(config.entryPort, 80);
    assert.equal(config.sshProxyPort, 2222);
    assert.equal(config.sshProxyHost, '0.0.0.0');
    assert.equal(loadConfig({ ADMIN_JWT_SECRET: secret, HTTP_HOST: '10.0.0.5' }).sshProxyHost, '10.0.0.5');
    assert.equal(config.adminUsername, 'admin');
    assert.equal(config.tokenTtlSeconds, 12 * 3600);
    assert.equal(config.logFormat, 'json');
    assert.deepEqual(config.database, { kind: 'sqlite', file: path.resolve('data/gateway.db') });
    assert.equal(config.rateLimitIpv6Prefix, 64);
  });

  it('takes RATE_LIMIT_IPV6_PREFIX as a prefix length and refuses anything else', () => {
    assert.equal(
      loadConfig({ ADMIN_JWT_SECRET: secret, RATE_LIMIT_IPV6_PREFIX: '56' }).rateLimitIpv6Prefix,
      56,
    );
    for (const wrong of ['0', '129', '/64', 'sixty'])
      assert.throws(
        () => loadConfig({ ADMIN_JWT_SECRET: secret, RATE_LIMIT_IPV6_PREFIX: wrong }),
        (e: ConfigError) =>
          e.problems.some((p) => p.includes('RATE_LIMIT_IPV6_PREFIX must be a prefix length')),
      );
  });

  it('caps SSH sessions per host at what the relay takes, 100 by default', () => {
    assert.equal(loadConfig({ ADMIN_JWT_SECRET: secret }).sshMaxSessionsPerHost, 100);
    assert.equal(
      loadConfig({ ADMIN_JWT_SECRET: secret, SSH_MAX_SESSIONS_PER_HOST: '128' }).sshMaxSessionsPerHost,
      128,
    );
    assert.throws(
      () => loadConfig({ ADMIN_JWT_SECRET: secret, SSH_MAX_SESSIONS_PER_HOST: '129' }),
      (e: ConfigError) =>
        e.problems.some((p) =>
          p.includes(
            "SSH_MAX_SESSIONS_PER_HOST may be at most 128, the connections the relay in each host's",
          ),
        ),
    );
  });

  it('takes EGRESS_POLICY as a JSON policy and says what is wrong with a bad one', () => {
    const policy = {
      mode: 'enforce',
      default_action: 'deny',
      rules: [{ action: 'allow', domain: '*.example.com' }],
    };
    assert.deepEqual(
      loadConfig({ ADMIN_JWT_SECRET: secret, EGRESS_POLICY: JSON.stringify(policy) }).egress.policy,
      policy,
    );
    assert.equal(loadConfig({ ADMIN_JWT_SECRET: secret }).egress.policy, null);
    const refused = (value: string, message: RegExp) =>
      assert.throws(
        () => loadConfig({ ADMIN_JWT_SECRET: secret, EGRESS_POLICY: value }),
        (e: ConfigError) => e.problems.some((p) => message.test(p)),
      );
    refused('{mode: enforce}', /EGRESS_POLICY must be JSON/);
    refused(JSON.stringify({ ...policy, mode: 'strict' }), /EGRESS_POLICY is not a policy: \/mode/);
    refused(
      JSON.stringify({ ...policy, rules: [{ action: 'deny' }] }),
      /EGRESS_POLICY: rules\[0\] matches nothing/,
    );
    refused(
      JSON.stringify({ ...policy, rules: [{ action: 'deny', address: '198.51.100.0/40' }] }),
      /not an address or CIDR block/,
    );
  });

  it('refuses to start without a JWT secret or with a short one', () => {
    assert.throws(
      () => loadConfig({}),
      (e: ConfigError) => e.problems.some((p) => p.includes('ADMIN_JWT_SECRET is required')),
    );
    assert.throws(
      () => loadConfig({ ADMIN_JWT_SECRET: 'short' }),
      (e: ConfigError) => e.problems.some((p) => p.includes('at least 32 characters')),
    );
  });

  it('collects every problem with a clear message', () => {
    try {
      loadConfig({
        ADMIN_JWT_SECRET: secret,
        HTTP_PORT: 'eighty',
        LOG_FORMAT: 'xml',
        TOKEN_TTL: 'forever',
        ENTRY_PORT: '70000',
      });
      assert.fail('expected a ConfigError');
    } catch (error) {
      assert.ok(error instanceof ConfigError);
      assert.equal(error.problems.length, 4);
      assert.match(error.message, /HTTP_PORT must be a port number/);
    }
  });

  it('parses every DATABASE_URL form', () => {
    const sqlite = loadConfig({ ADMIN_JWT_SECRET: secret, DATABASE_URL: 'sqlite:/var/lib/ccp/db.sqlite' });
    assert.deepEqual(sqlite.database, { kind: 'sqlite', file: '/var/lib/ccp/db.sqlite' });
    const file = loadConfig({ ADMIN_JWT_SECRET: secret, DATABASE_URL: 'file:relative.db' });
    assert.deepEqual(file.database, { kind: 'sqlite', file: path.resolve('relative.db') });
    const pg = loadConfig({
      ADMIN_JWT_SECRET: secret,
      DATABASE_URL: 'postgres://u:p@db.example:5432/ccp?sslmode=verify-full&sslrootcert=/etc/ca.pem',
    });
    assert.deepEqual(pg.database, {
      kind: 'postgres',
      connectionString: 'postgres://u:p@db.example:5432/ccp',
      sslMode: 'verify-full',
      sslRootCert: '/etc/ca.pem',
    });
    assert.throws(
      () => loadConfig({ ADMIN_JWT_SECRET: secret, DATABASE_URL: 'postgres://h/db?sslmode=prefer' }),
      /sslmode/,
    );
    assert.throws(
      () => loadConfig({ ADMIN_JWT_SECRET: secret, DATABASE_URL: 'mysql://h/db' }),
      /DATABASE_URL must start/,
    );
  });

  it('reads .env under the environment, and the environment wins', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ccp-env-'));
    try {
      const file = path.join(dir, '.env');
      writeFileSync(file, `HTTP_PORT=9000\nADMIN_JWT_SECRET=${secret}\n# comment\nLOG_LEVEL=debug\n`);
      const env = readEnvironment({ HTTP_PORT: '9100' }, file);
      const config = loadConfig(env);
      assert.equal(config.httpPort, 9100);
      assert.equal(config.logLevel, 'debug');
      assert.deepEqual(readEnvironment({ A: '1' }, path.join(dir, 'missing.env')), { A: '1' });
    } finally {
      rmSync(dir, { recursive: true });
    }
  });

  it('parses durations', () => {
    assert.equal(parseDuration('12h'), 43200);
    assert.equal(parseDuration('30m'), 1800);
    assert.equal(parseDuration('90'), 90);
    assert.equal(parseDuration('2d'), 172800);
    assert.equal(parseDuration('0'), null);
    assert.equal(parseDuration('soon'), null);
  });
});
