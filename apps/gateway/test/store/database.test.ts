import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { needs } from '../../../../test/support/needs.js';
import { parseDatabaseUrl } from '../../src/config.js';
import { type Database, openDatabase } from '../../src/store/database.js';
import { ConstraintViolation } from '../../src/store/errors.js';
import {
  createPostgresDatabase,
  DATABASES,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';

const MIGRATIONS_DIR = fileURLToPath(new URL('../../src/store/migrations/', import.meta.url));

const now = () => new Date().toISOString();

for (const kind of DATABASES) {
  describe(`storage (${kind})`, () => {
    let t: TestGateway;
    let database: Database;
    before(async () => {
      t = await startTestGateway(kind);
      database = t.gateway.database;
    });
    after(() => t.close());

    const userRow = (username: string) => ({
      id: randomUUID(),
      username,
      username_key: username.toLowerCase(),
      role: 'user' as const,
      status: 'active' as const,
      password_hash: 'x',
      token_version: 0,
      expires_at: null,
      expiry_handled_at: null,
      short_id: randomUUID().slice(0, 8),
      ssh_user: username,
      ssh_pass_sealed: 'sealed',
      created_at: now(),
      updated_at: now(),
    });

    it('throws the same ConstraintViolation for unique and foreign-key violations on either database', async () => {
      const users = t.gateway.repositories.users;
      await users.insert(userRow('dup'));
      const duplicate = await users.insert(userRow('DUP')).catch((error: unknown) => error);
      assert.ok(duplicate instanceof ConstraintViolation);
      assert.equal(duplicate.violated, 'unique');
      const orphan = await t.gateway.repositories.sshKeys
        .insert({
          id: randomUUID(),
          user_id: randomUUID(),
          label: 'k',
          public_key: 'ssh-ed25519 AAAA',
          fingerprint: 'SHA256:x',
          key_type: 'ssh-ed25519',
          created_at: now(),
        })
        .catch((error: unknown) => error);
      assert.ok(orphan instanceof ConstraintViolation);
      assert.equal(orphan.violated, 'foreign_key');
    });

    it('cascades a user delete to keys and hosts, and keeps events', async () => {
      const user = await t.gateway.repositories.users.insert(userRow('cascade'));
      await database.db
        .insertInto('hosts')
        .values({
          id: randomUUID(),
          short_id: 'abcdefgh',
          user_id: user.id,
          status: 'created',
          image: null,
          last_error: null,
          created_at: now(),
          updated_at: now(),
          started_at: null,
        })
        .execute();
      await t.gateway.bus.emit({
        type: 'user.password_changed',
        message: 'kept',
        actor: { kind: 'system', id: null, username: null },
        userId: user.id,
      });
      await t.gateway.repositories.users.delete(user.id);
      const hosts = await database.db
        .selectFrom('hosts')
        .selectAll()
        .where('user_id', '=', user.id)
        .execute();
      assert.equal(hosts.length, 0);
      const events = await database.db
        .selectFrom('events')
        .selectAll()
        .where('user_id', '=', user.id)
        .execute();
      assert.equal(events.length, 1);
    });

    it('runs migrations idempotently on an existing database', async () => {
      if (kind === 'sqlite') {
        const again = await openDatabase(t.gateway.config.database);
        await again.ping();
        await again.close();
      } else {
        const again = await openDatabase(t.gateway.config.database);
        const tables = await sql<{ n: number }>`select count(*)::int as n from kysely_migration`.execute(
          again.db,
        );
        // Each migration once, however often the database is opened.
        assert.equal(tables.rows[0]!.n, readdirSync(MIGRATIONS_DIR).length);
        await again.close();
      }
    });
  });
}

describe('PostgreSQL over TLS', {
  skip: needs('postgres') || (!process.env.TEST_POSTGRES_CA && 'TEST_POSTGRES_CA is not set'),
}, () => {
  let target: Awaited<ReturnType<typeof createPostgresDatabase>>;
  before(async () => {
    target = await createPostgresDatabase();
  });
  after(() => target.drop());
  const urlWith = (query: string) => `${target.url}?${query}`;
  const usesTls = async (url: string) => {
    const config = parseDatabaseUrl(url, '/tmp');
    if (typeof config === 'string') throw new Error(config);
    const database = await openDatabase(config);
    try {
      const row = await sql<{
        ssl: boolean;
      }>`select ssl from pg_stat_ssl where pid = pg_backend_pid()`.execute(database.db);
      return row.rows[0]!.ssl;
    } finally {
      await database.close();
    }
  };

  it('connects without TLS for sslmode=disable and with TLS for require', async () => {
    assert.equal(await usesTls(urlWith('sslmode=disable')), false);
    assert.equal(await usesTls(urlWith('sslmode=require')), true);
  });

  it('verifies the server certificate for verify-full', async () => {
    assert.equal(
      await usesTls(urlWith(`sslmode=verify-full&sslrootcert=${process.env.TEST_POSTGRES_CA}`)),
      true,
    );
    await assert.rejects(usesTls(urlWith('sslmode=verify-full')), /certificate/);
  });
});
