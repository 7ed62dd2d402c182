/**
 * Copies the gateway's SQLite database for deploy/backup.sh and deploy/restore.sh.
 * Usage: sqlite-backup backup SOURCE DEST | restore BACKUP TARGET
 */
import { existsSync, renameSync, rmSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import SqliteDatabase from 'better-sqlite3';

/** Pages per backup step after the first: all of them, so the copy is one read transaction. */
const ALL_PAGES = 0x7fffffff;

/** Makes DEST a consistent copy of SOURCE with SQLite's online backup API while the gateway keeps writing.
 * Copying every page in one step holds one read snapshot; in WAL mode writers carry on beside it, whereas
 * small steps would restart each time a writer changes the source. */
export async function backupSqlite(source: string, destination: string): Promise<void> {
  if (!existsSync(source)) throw new Error(`the SQLite database ${source} does not exist`);
  const db = new SqliteDatabase(source, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 10000');
    await db.backup(destination, { progress: () => ALL_PAGES });
  } finally {
    db.close();
  }
  const copy = new SqliteDatabase(destination);
  try {
    // A self-contained file: no -wal or -shm beside it in the archive.
    copy.pragma('journal_mode = DELETE');
    checkIntegrity(copy, destination);
  } finally {
    copy.close();
  }
}

/** Replaces TARGET (the gateway must be stopped) with the database in BACKUP, checked first. */
export async function restoreSqlite(backup: string, target: string): Promise<void> {
  const source = new SqliteDatabase(backup, { readonly: true, fileMustExist: true });
  const staging = `${target}.restoring`;
  rmSync(staging, { force: true });
  try {
    checkIntegrity(source, backup);
    await source.backup(staging, { progress: () => ALL_PAGES });
  } finally {
    source.close();
  }
  // A WAL left by the old database would be replayed onto the restored one.
  for (const suffix of ['-wal', '-shm']) rmSync(`${target}${suffix}`, { force: true });
  renameSync(staging, target);
}

function checkIntegrity(db: SqliteDatabase.Database, file: string): void {
  const result = db.pragma('integrity_check', { simple: true });
  if (result !== 'ok') throw new Error(`${file} failed the integrity check: ${String(result)}`);
}

async function main(argv: string[]): Promise<void> {
  const [command, from, to] = argv;
  if (!from || !to || (command !== 'backup' && command !== 'restore')) {
    throw new Error('usage: sqlite-backup backup SOURCE DEST | restore BACKUP TARGET');
  }
  await (command === 'backup' ? backupSqlite(from, to) : restoreSqlite(from, to));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).catch((error: unknown) => {
    process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}
