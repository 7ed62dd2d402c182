import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { onCleanup } from './children.js';

/** A role that may create databases; bench/run.sh creates it with scripts/postgres.sh. */
export const POSTGRES_ADMIN_URL =
  process.env.BENCH_POSTGRES_URL ?? 'postgres://ccp_bench:ccp_bench@127.0.0.1:5432/postgres';

async function query(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** Creates an empty database for one run and returns its URL; it is dropped when the bench ends. */
export async function createBenchDatabase(): Promise<string> {
  const name = `ccp_bench_${randomBytes(6).toString('hex')}`;
  await query(`create database ${name}`);
  onCleanup(() => query(`drop database if exists ${name} with (force)`));
  const url = new URL(POSTGRES_ADMIN_URL);
  url.pathname = `/${name}`;
  return url.toString();
}
