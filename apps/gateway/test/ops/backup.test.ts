import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import pino from 'pino';
import { needs } from '../../../../test/support/needs.js';
import { loadConfig } from '../../src/config.js';
import { createGateway } from '../../src/gateway.js';
import type { Db } from '../../src/store/database.js';
import { KeyFactory } from '../helpers/ssh-keygen.js';
import {
  ADMIN_PASSWORD,
  createPostgresDatabase,
  DATABASES,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';

const ROOT = path.resolve(import.meta.dirname, '../../../..');
const ARCHIVE = /^cloud-cli-proxy-\d{8}T\d{6}Z\.tar\.gz$/;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a deploy script without blocking the event loop (the gateway under test keeps serving). */
function runScript(script: string, args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [path.join(ROOT, 'deploy', script), ...args], {
      // ENV_FILE keeps the checkout's own .env out of the tests.
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '/root',
        ENV_FILE: '/nonexistent',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
    });
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const tempDir = (prefix: string) => mkdtempSync(path.join(tmpdir(), prefix));

/**
 * A PATH whose PostgreSQL clients write their arguments to `log` (one line per run) and then run the real ones:
 * what every account on the machine could read in /proc while they run.
 */
function recordingPgPath(dir: string, log: string): string {
  const real = (process.env.PATH ?? '').split(':').filter((entry) => entry !== dir);
  for (const tool of ['pg_dump', 'pg_restore', 'psql'])
    writeFileSync(
      path.join(dir, tool),
      `#!/bin/sh\nprintf '%s\\n' "${tool} $*" >>'${log}'\nPATH='${real.join(':')}' exec ${tool} "$@"\n`,
      { mode: 0o755 },
    );
  return [dir, ...real].join(':');
}
const archivesIn = (dir: string) => readdirSync(dir).filter((name) => ARCHIVE.test(name));

async function tableNames(db: Db, kind: 'sqlite' | 'postgres'): Promise<string[]> {
  const rows =
    kind === 'sqlite'
      ? await sql<{ name: string }>`select name from sqlite_master
          where type = 'table' and name not like 'sqlite_%'`.execute(db)
      : await sql<{ name: string }>`select table_name as name from information_schema.tables
          where table_schema = current_schema()`.execute(db);
  return rows.rows.map((r) => r.name).sort();
}

/** Every row of every table, each as its JSON text. */
async function dump(db: Db, kind: 'sqlite' | 'postgres'): Promise<Map<string, Set<string>>> {
  const tables = new Map<string, Set<string>>();
  for (const name of await tableNames(db, kind)) {
    const rows = await sql<Record<string, unknown>>`select * from ${sql.table(name)}`.execute(db);
    tables.set(name, new Set(rows.rows.map((row) => JSON.stringify(row))));
  }
  return tables;
}

const socks = (exit: string) => ({
  label: `exit ${exit}`,
  ip_address: exit,
  proxy_config: {
    type: 'socks',
    server: exit,
    server_port: 1080,
    version: '5',
    username: 'u',
    password: `pw-${exit}`,
  },
});

for (const kind of DATABASES) {
  describe(`backup and restore (${kind})`, { skip: needs('ssh-keygen') }, () => {
    let t: TestGateway;
    const keys = new KeyFactory();
    const cleanup: Array<() => Promise<void> | void> = [];
    let hostId: string;
    let sshPass: string;
    let egressId: string;

    before(async () => {
      t = await startTestGateway(kind);
      const users = [];
      for (const name of ['alice', 'bob', 'carol']) users.push(await t.createUser(name));
      const alice = users[0]!;
      sshPass = alice.sshPass;
      egressId = (await t.request('POST', '/v1/admin/egress-ips', { body: socks('198.51.100.31') })).body.id;
      await t.request('POST', '/v1/admin/egress-ips', { body: socks('198.51.100.32') });
      const key = await t.request('POST', `/v1/admin/users/${alice.id}/ssh-keys`, {
        body: { public_key: keys.generate('ed25519').publicKey },
      });
      assert.equal(key.status, 201);
      const host = await t.request('POST', '/v1/admin/hosts', {
        body: { user_id: alice.id, egress_ip_id: egressId },
      });
      assert.equal(host.status, 201, JSON.stringify(host.body));
      hostId = host.body.id;
      assert.equal((await t.request('POST', `/v1/admin/hosts/${hostId}/start`)).status, 202);
      await t.request('POST', '/v1/admin/hosts', { body: { user_id: users[1]!.id } });
      await t.gateway.tasks.idle();
    });
    after(async () => {
      for (const step of cleanup.reverse()) await step();
      await t.close();
      keys.cleanup();
    });

    it('backs up while the gateway serves writes; a fresh gateway restored from it has every row and secret', async () => {
      const backupDir = tempDir('ccp-backups-');
      cleanup.push(() => rmSync(backupDir, { recursive: true, force: true }));
      const databaseUrl =
        t.gateway.config.database.kind === 'sqlite'
          ? `sqlite:${t.gateway.config.database.file}`
          : `${t.gateway.config.database.connectionString}`;
      const before = await dump(t.gateway.database.db, kind);

      // Writes keep coming (bounded) until the backup is done.
      let writing = true;
      let written = 0;
      const writes = (async () => {
        while (writing && written < 400) {
          const response = await t.request('POST', '/v1/admin/users', {
            body: { username: `load${written}`, password: 'load-password' },
          });
          assert.equal(response.status, 201);
          written++;
        }
      })();
      while (written < 3) await new Promise((resolve) => setTimeout(resolve, 10));
      const startedAt = written;
      const shims = tempDir('ccp-pg-shims-');
      cleanup.push(() => rmSync(shims, { recursive: true, force: true }));
      const argsLog = path.join(shims, 'arguments.log');
      const PATH = recordingPgPath(shims, argsLog);
      const backup = await runScript('backup.sh', [], {
        DATABASE_URL: databaseUrl,
        DATA_DIR: t.dataDir,
        BACKUP_DIR: backupDir,
        PATH,
      });
      writing = false;
      await writes;
      assert.equal(backup.code, 0, backup.stderr);
      assert.ok(written > startedAt, `writes went on during the backup (${startedAt} -> ${written})`);
      const archive = backup.stdout.trim();
      assert.equal(path.dirname(archive), backupDir);
      assert.match(path.basename(archive), ARCHIVE);
      assert.equal(statSync(archive).mode & 0o777, 0o600, 'the archive holds the secrets key');
      assert.deepEqual(readdirSync(backupDir), [path.basename(archive)], 'no partial files left');
      const source = await dump(t.gateway.database.db, kind);

      // Restore into a fresh database and DATA_DIR.
      const dataDir = tempDir('ccp-restored-');
      cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }));
      let freshUrl = `sqlite:${path.join(dataDir, 'gateway.db')}`;
      if (kind === 'postgres') {
        const fresh = await createPostgresDatabase();
        cleanup.push(fresh.drop);
        freshUrl = fresh.url;
      }
      const restore = await runScript('restore.sh', [archive], {
        DATABASE_URL: freshUrl,
        DATA_DIR: dataDir,
        PATH,
      });
      assert.equal(restore.code, 0, restore.stderr);
      if (kind === 'postgres') {
        // The clients ran, and the database password was never among their arguments.
        const password = decodeURIComponent(new URL(databaseUrl).password);
        const ran = readFileSync(argsLog, 'utf8');
        assert.match(ran, /^pg_dump /m);
        assert.match(ran, /^pg_restore /m);
        assert.ok(password && !ran.includes(`:${password}@`), `a password in the arguments:\n${ran}`);
      }

      const gateway = await createGateway(
        loadConfig({
          ADMIN_JWT_SECRET: randomBytes(36).toString('base64'),
          DATA_DIR: dataDir,
          DATABASE_URL: freshUrl,
          HTTP_HOST: '127.0.0.1',
          HTTP_PORT: '0',
          SSH_PROXY_PORT: '0',
          DOCKER_SOCKET: path.join(dataDir, 'no-engine.sock'),
          // Its node's last heartbeat came with the backup: it waits that long for its old self to be gone.
          NODE_HEARTBEAT_SECONDS: '1',
          NODE_DEAD_SECONDS: '2',
        }),
        { logger: pino({ level: 'silent' }), httpLogger: false },
      );
      try {
        const restored = await dump(gateway.database.db, kind);
        assert.deepEqual([...restored.keys()], [...source.keys()], 'the same tables');
        for (const [table, rows] of restored) {
          const sourceRows = source.get(table)!;
          for (const row of rows) {
            // What the restored gateway wrote itself as it started: its node's row, its joining (an event, and
            // a live message on the nodes topic).
            if (table === 'nodes' || row.includes('"type":"node.') || row.includes('\\"topic\\":\\"nodes\\"'))
              continue;
            assert.ok(sourceRows.has(row), `${table}: restored row is in the source: ${row}`);
          }
          for (const row of before.get(table)!) {
            if (table === 'nodes') continue;
            assert.ok(rows.has(row), `${table}: a row written before the backup is restored: ${row}`);
          }
        }
        const loadUsers = [...restored.get('users')!].filter((row) =>
          row.includes('"username":"load'),
        ).length;
        assert.ok(loadUsers >= startedAt && loadUsers <= written, `${loadUsers} of ${written} load users`);
        if (kind === 'sqlite') {
          const broken = await sql`pragma foreign_key_check`.execute(gateway.database.db);
          assert.deepEqual(broken.rows, []);
        }

        // The secrets key came along: sealed secrets open, and the admin logs in with the old password.
        const login = await gateway.http.inject({
          method: 'POST',
          url: '/v1/auth/login',
          payload: { username: 'admin', password: ADMIN_PASSWORD },
        });
        assert.equal(login.statusCode, 200);
        const headers = { authorization: `Bearer ${login.json().token}` };
        const host = await gateway.http.inject({ url: `/v1/admin/hosts/${hostId}`, headers });
        assert.equal(host.statusCode, 200);
        const entry = await gateway.http.inject({
          method: 'POST',
          url: `/v1/entry/${host.json().short_id}/auth`,
          payload: { password: 'alice-password' },
        });
        assert.equal(entry.statusCode, 200, entry.body);
        assert.equal(entry.json().ssh_pass, sshPass);
        const egress = await gateway.http.inject({ url: `/v1/admin/egress-ips/${egressId}`, headers });
        assert.equal(egress.statusCode, 200);
      } finally {
        await gateway.close();
      }

      // A second restore over the now populated database is refused without --force, then done with it.
      const again = await runScript('restore.sh', [archive], { DATABASE_URL: freshUrl, DATA_DIR: dataDir });
      assert.notEqual(again.code, 0);
      assert.match(again.stderr, /--force/);
      const forced = await runScript('restore.sh', ['--force', archive], {
        DATABASE_URL: freshUrl,
        DATA_DIR: dataDir,
      });
      assert.equal(forced.code, 0, forced.stderr);
    });

    it('fails with a clear message when the database cannot be read, and writes no archive', async () => {
      const backupDir = tempDir('ccp-backups-');
      cleanup.push(() => rmSync(backupDir, { recursive: true, force: true }));
      const url =
        kind === 'postgres'
          ? 'postgres://ccp_test:wrong-secret@127.0.0.1:1/nowhere'
          : `sqlite:${path.join(backupDir, 'missing.db')}`;
      const run = await runScript('backup.sh', [], {
        DATABASE_URL: url,
        DATA_DIR: t.dataDir,
        BACKUP_DIR: backupDir,
      });
      assert.notEqual(run.code, 0);
      assert.match(
        run.stderr,
        kind === 'postgres' ? /error: pg_dump of postgres:\/\/ccp_test:\*\*\*@/ : /does not exist/,
      );
      assert.doesNotMatch(run.stderr, /wrong-secret/);
      assert.deepEqual(readdirSync(backupDir), []);
    });
  });
}

describe('backup script rules', () => {
  let t: TestGateway;
  let env: Record<string, string>;
  const dirs: string[] = [];
  const dir = (prefix: string) => {
    const made = tempDir(prefix);
    dirs.push(made);
    return made;
  };
  before(async () => {
    t = await startTestGateway('sqlite');
    env = { DATA_DIR: t.dataDir };
  });
  after(async () => {
    await t.close();
    for (const made of dirs) rmSync(made, { recursive: true, force: true });
  });

  it('uses the documented default BACKUP_DIR and RETENTION_DAYS', async () => {
    const help = await runScript('backup.sh', ['--help'], {});
    assert.equal(help.code, 0);
    assert.match(help.stdout, /BACKUP_DIR\s+where archives go \(default \/var\/backups\/cloud-cli-proxy\)/);
    assert.match(help.stdout, /\(default 7; 0 keeps every archive\)/);
  });

  it('deletes only its own archives older than RETENTION_DAYS', async () => {
    const backupDir = dir('ccp-retention-');
    const age = (name: string, days: number) => {
      const file = path.join(backupDir, name);
      writeFileSync(file, 'x');
      const when = new Date(Date.now() - days * 86_400_000);
      utimesSync(file, when, when);
    };
    age('cloud-cli-proxy-20200101T000000Z.tar.gz', 10);
    age('cloud-cli-proxy-20200102T000000Z.tar.gz', 2);
    age('notes.txt', 30);
    age('cloud-cli-proxy-manual.tar.gz', 30);
    mkdirSync(path.join(backupDir, 'cloud-cli-proxy-20200103T000000Z.tar.gz.d'));

    const first = await runScript('backup.sh', [], { ...env, BACKUP_DIR: backupDir });
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stderr, /deleted old backup .*20200101T000000Z/);
    const kept = readdirSync(backupDir);
    assert.ok(!kept.includes('cloud-cli-proxy-20200101T000000Z.tar.gz'));
    for (const name of [
      'cloud-cli-proxy-20200102T000000Z.tar.gz',
      'notes.txt',
      'cloud-cli-proxy-manual.tar.gz',
    ]) {
      assert.ok(kept.includes(name), `${name} is kept`);
    }
    assert.equal(archivesIn(backupDir).length, 2);

    const second = await runScript('backup.sh', [], { ...env, BACKUP_DIR: backupDir, RETENTION_DAYS: '1' });
    assert.equal(second.code, 0, second.stderr);
    const now = readdirSync(backupDir);
    assert.ok(!now.includes('cloud-cli-proxy-20200102T000000Z.tar.gz'), '2 days old is past 1 day');
    assert.ok(now.includes('notes.txt') && now.includes('cloud-cli-proxy-manual.tar.gz'));
    assert.equal(archivesIn(backupDir).length, 2, 'both new archives are kept');
  });

  it('fails with a message on an unwritable BACKUP_DIR, a missing key or a bad setting', async () => {
    const base = dir('ccp-bad-');
    writeFileSync(path.join(base, 'a-file'), 'x');
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ ...env, BACKUP_DIR: path.join(base, 'a-file', 'backups') }, /cannot create BACKUP_DIR/],
      [{ DATA_DIR: path.join(base, 'empty'), BACKUP_DIR: base }, /secrets\.key is missing/],
      [{ ...env, BACKUP_DIR: base, RETENTION_DAYS: 'week' }, /RETENTION_DAYS must be a whole number/],
      [{ ...env, BACKUP_DIR: base, DATABASE_URL: 'mysql://x' }, /DATABASE_URL must start with/],
    ];
    for (const [caseEnv, message] of cases) {
      const run = await runScript('backup.sh', [], caseEnv);
      assert.notEqual(run.code, 0, JSON.stringify(caseEnv));
      assert.match(run.stderr, message);
      assert.equal(run.stdout, '');
    }
    assert.deepEqual(readdirSync(base), ['a-file']);
  });

  it('restore refuses an archive of another database kind and a DATA_DIR with a different key', async () => {
    const backupDir = dir('ccp-kind-');
    const made = await runScript('backup.sh', [], { ...env, BACKUP_DIR: backupDir });
    assert.equal(made.code, 0, made.stderr);
    const archive = made.stdout.trim();
    const target = dir('ccp-target-');
    const wrongKind = await runScript('restore.sh', [archive], {
      DATA_DIR: target,
      DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none',
    });
    assert.notEqual(wrongKind.code, 0);
    assert.match(wrongKind.stderr, /holds a sqlite database but DATABASE_URL is postgres/);
    writeFileSync(path.join(target, 'secrets.key'), `${randomBytes(32).toString('base64')}\n`);
    const otherKey = await runScript('restore.sh', [archive], { DATA_DIR: target });
    assert.notEqual(otherKey.code, 0);
    assert.match(otherKey.stderr, /secrets\.key differs from the archive's; --force replaces it/);
    assert.deepEqual(readdirSync(target), ['secrets.key'], 'nothing was changed');
    const notArchive = await runScript('restore.sh', [path.join(target, 'secrets.key')], {
      DATA_DIR: target,
    });
    assert.match(notArchive.stderr, /is not an archive of deploy\/backup\.sh/);
  });
});
