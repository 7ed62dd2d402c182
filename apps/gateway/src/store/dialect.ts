import type { ColumnDefinitionBuilder } from 'kysely';

/** Everything that differs between SQLite and PostgreSQL lives in this file. */
export type DialectKind = 'sqlite' | 'postgres';

export interface MigrationDialect {
  kind: DialectKind;
}

export function autoIncrementColumn(dialect: MigrationDialect): 'integer' | 'serial' {
  return dialect.kind === 'sqlite' ? 'integer' : 'serial';
}

/** For counters that may pass 2^31 (SQLite's integer is 64 bits already); PostgreSQL returns it as a string. */
export function bigAutoIncrementColumn(dialect: MigrationDialect): 'integer' | 'bigserial' {
  return dialect.kind === 'sqlite' ? 'integer' : 'bigserial';
}

export function autoIncrementConstraint(dialect: MigrationDialect, column: ColumnDefinitionBuilder) {
  return dialect.kind === 'sqlite' ? column.primaryKey().autoIncrement() : column.primaryKey();
}

export type ViolatedConstraint = 'unique' | 'foreign_key' | null;

interface DriverError {
  code?: unknown;
  constraint?: unknown;
  message?: unknown;
}

/** Classifies a driver error from either database, so repositories throw one ConstraintViolation for both. */
export function constraintViolation(error: unknown): ViolatedConstraint {
  if (typeof error !== 'object' || error === null) return null;
  const code = String((error as DriverError).code ?? '');
  if (code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
    return 'unique';
  }
  if (code === '23503' || code === 'SQLITE_CONSTRAINT_FOREIGNKEY') return 'foreign_key';
  return null;
}

/** True when the database (or the disk under it) has no room left: SQLite's SQLITE_FULL, PostgreSQL's
 * disk_full class 53100, or ENOSPC from the file system. */
export function isStorageFull(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = String((error as DriverError).code ?? '');
  return code === 'SQLITE_FULL' || code === '53100' || code === 'ENOSPC';
}

/** True when the error means the database cannot be reached at all (as opposed to a bad query). */
export function isConnectionError(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = String((error as DriverError).code ?? '');
  const message = String((error as DriverError).message ?? '');
  return (
    [
      'ECONNREFUSED',
      'ECONNRESET',
      'ETIMEDOUT',
      'EPIPE',
      'ENOTFOUND',
      '57P01',
      '57P03',
      '08006',
      '08001',
    ].includes(code) ||
    message.includes('Connection terminated') ||
    message.includes('timeout exceeded when trying to connect')
  );
}
