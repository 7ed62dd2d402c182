import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse as parseDotenv } from 'dotenv';
import pg from 'pg';
import { needs } from '../../../../test/support/needs.js';
import { loadConfig } from '../../src/config.js';
import { POSTGRES_ADMIN_URL } from '../helpers/test-gateway.js';

const SETUP = path.resolve(import.meta.dirname, '../../../../deploy/setup.sh');
const TEST_CA = process.env.TEST_POSTGRES_CA ?? '/var/lib/postgresql/ccp-test-tls/ca.crt';

/** Runs the set-up without a terminal and without installing, building or starting anything. */
function setup(dir: string, args: string[] = [], env: Record<string, string> = {}) {
  const run = spawnSync('bash', [SETUP, '--config-only', '--data-dir', path.join(dir, 'data'), ...args], {
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/root',
      ENV_FILE: path.join(dir, '.env'),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    encoding: 'utf8',
  });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

const readEnv = (dir: string) => parseDotenv(readFileSync(path.join(dir, '.env')));

async function connects(url: string): Promise<void> {
  const config = loadConfig({ ADMIN_JWT_SECRET: 'x'.repeat(48), DATABASE_URL: url });
  assert.equal(config.database.kind, 'postgres');
  if (config.database.kind !== 'postgres') return;
  const client = new pg.Client({
    connectionString: config.database.connectionString,
    ssl:
      config.database.sslMode === 'disable'
        ? false
        : {
            rejectUnauthorized: config.database.sslMode === 'verify-full',
            ...(config.database.sslRootCert ? { ca: readFileSync(config.database.sslRootCert, 'utf8') } : {}),
          },
  });
  await client.connect();
  try {
    const result = await client.query('select current_user as who');
    assert.ok(result.rows[0].who);
  } finally {
    await client.end();
  }
}

describe('deploy/setup.sh without a terminal', () => {
  const dirs: string[] = [];
  const dir = () => {
    const made = mkdtempSync(path.join(tmpdir(), 'ccp-setup-'));
    dirs.push(made);
    return made;
  };
  after(() => {
    for (const made of dirs) rmSync(made, { recursive: true, force: true });
  });

  it('writes .env with mode 0600, a 20-character admin password shown once and a 48-character JWT secret', () => {
    const d = dir();
    const first = setup(d);
    assert.equal(first.code, 0, first.stderr);
    assert.equal(statSync(path.join(d, '.env')).mode & 0o777, 0o600);
    const env = readEnv(d);
    assert.match(env.ADMIN_PASSWORD ?? '', /^[A-Za-z0-9]{20}$/);
    assert.match(env.ADMIN_JWT_SECRET ?? '', /^[A-Za-z0-9]{48}$/);
    assert.equal(env.DATABASE_URL, `sqlite:${path.join(d, 'data', 'gateway.db')}`);
    assert.ok(first.stdout.includes(`Password:  ${env.ADMIN_PASSWORD}`));
    // What it wrote is a configuration the gateway accepts.
    assert.equal(loadConfig(env).database.kind, 'sqlite');

    const second = setup(d);
    assert.equal(second.code, 0, second.stderr);
    assert.deepEqual(readEnv(d), env, 're-running keeps every secret and setting');
    assert.ok(!second.stdout.includes(env.ADMIN_PASSWORD!), 'the password is shown once');
  });

  it('refuses to change the storage of an existing .env without a terminal, and changes nothing', {
    skip: needs('postgres'),
  }, () => {
    const d = dir();
    assert.equal(setup(d).code, 0);
    const before = readFileSync(path.join(d, '.env'), 'utf8');
    const run = setup(d, ['--storage', 'external', '--database-url', POSTGRES_ADMIN_URL]);
    assert.notEqual(run.code, 0);
    assert.match(run.stderr, /already has DATABASE_URL=sqlite:.*remove that line/);
    assert.equal(readFileSync(path.join(d, '.env'), 'utf8'), before);
  });

  it('external PostgreSQL: checks the URL by connecting and says why it failed', {
    skip: needs('postgres'),
  }, () => {
    const d = dir();
    const wrong = new URL(POSTGRES_ADMIN_URL);
    wrong.password = 'not-the-password';
    const run = setup(d, ['--storage', 'external', '--database-url', wrong.toString()]);
    assert.notEqual(run.code, 0);
    assert.match(
      run.stderr,
      /cannot connect to postgres:\/\/ccp_test:\*\*\*@127\.0\.0\.1:5432\/postgres: .*password authentication failed/,
    );
    assert.doesNotMatch(run.stderr, /not-the-password/);
    assert.equal(readEnv(d).DATABASE_URL, undefined);

    const noCa = setup(d, [
      '--storage',
      'external',
      '--database-url',
      POSTGRES_ADMIN_URL,
      '--ssl',
      'verify-full',
    ]);
    assert.notEqual(noCa.code, 0);
    assert.match(noCa.stderr, /verify-full needs --ssl-ca FILE/);
  });

  it('external PostgreSQL with sslmode=require', { skip: needs('postgres') }, async () => {
    const d = dir();
    const run = setup(d, [], { DATABASE_URL: POSTGRES_ADMIN_URL, DATABASE_SSL: 'require' });
    assert.equal(run.code, 0, run.stderr);
    const url = readEnv(d).DATABASE_URL!;
    assert.equal(url, `${POSTGRES_ADMIN_URL}?sslmode=require`);
    await connects(url);
  });

  it('external PostgreSQL with verify-full and a CA file', {
    skip: needs('postgres') || (!existsSync(TEST_CA) && `no test CA at ${TEST_CA}`),
  }, async () => {
    const d = dir();
    const run = setup(d, [
      '--storage',
      'external',
      '--database-url',
      POSTGRES_ADMIN_URL,
      '--ssl',
      'verify-full',
      '--ssl-ca',
      TEST_CA,
    ]);
    assert.equal(run.code, 0, run.stderr);
    const url = readEnv(d).DATABASE_URL!;
    assert.equal(url, `${POSTGRES_ADMIN_URL}?sslmode=verify-full&sslrootcert=${TEST_CA}`);
    await connects(url);
  });

  describe('built-in PostgreSQL', { skip: needs('root', 'postgres') }, () => {
    const name = `ccp_setup_${randomBytes(4).toString('hex')}`;
    const env = { BUILTIN_PG_ROLE: name, BUILTIN_PG_DATABASE: name };
    const psql = (command: string) =>
      execFileSync('runuser', ['-u', 'postgres', '--', 'psql', '-qAtc', command], { encoding: 'utf8' });
    before(() => {
      assert.equal(process.getuid?.(), 0, 'installing PostgreSQL needs root');
    });
    after(() => {
      psql(`drop database if exists ${name} with (force)`);
      psql(`drop role if exists ${name}`);
    });

    it('creates a role and database with a generated password and writes a DATABASE_URL that connects', async () => {
      const d = dir();
      const run = setup(d, ['--storage', 'postgres'], env);
      assert.equal(run.code, 0, run.stderr);
      const url = readEnv(d).DATABASE_URL!;
      assert.match(url, new RegExp(`^postgres://${name}:[A-Za-z0-9]{32}@127\\.0\\.0\\.1:\\d+/${name}$`));
      assert.equal(
        psql(`select pg_catalog.pg_get_userbyid(datdba) from pg_database where datname = '${name}'`).trim(),
        name,
      );
      await connects(url);

      // Re-running keeps the password (the server's and .env's) and still connects.
      const again = setup(d, [], env);
      assert.equal(again.code, 0, again.stderr);
      assert.equal(readEnv(d).DATABASE_URL, url);
      await connects(url);
    });
  });
});
