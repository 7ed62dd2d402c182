import path from 'node:path';
import Type, { type Static } from 'typebox';
import { positiveWhole } from '../shared/settings.js';

/** Where the gateway keeps its data (docs/configuration.md is written from these). */
export const StoreVariables = Type.Object({
  DATA_DIR: Type.String({
    default: 'data',
    description: 'State: the SQLite database, `secrets.key` (encrypts stored secrets; back it up), host keys',
  }),
  DATABASE_URL: Type.Optional(
    Type.String({
      // Checked by parseDatabaseUrl, whose messages say which part is wrong.
      typeText: 'URL: sqlite:, file:, postgres:// or postgresql://',
      defaultText: '`sqlite:$DATA_DIR/gateway.db`',
      description:
        '`sqlite:<path>` or `file:<path>`, or `postgres://user:pass@host:5432/db?sslmode=…` (see PostgreSQL below)',
    }),
  ),
  EVENT_RETENTION_DAYS: positiveWhole(90, 'Events older than this many days are deleted hourly'),
});
export type StoreVariables = Static<typeof StoreVariables>;

export type SslMode = 'disable' | 'require' | 'verify-full';

/** Which database the store opens (DATABASE_URL): an SQLite file, or PostgreSQL with its TLS mode. */
export type DatabaseConfig =
  | { kind: 'sqlite'; file: string }
  | { kind: 'postgres'; connectionString: string; sslMode: SslMode; sslRootCert: string | null };

/** The database a DATABASE_URL names, or what is wrong with it. */
export function parseDatabaseUrl(url: string, dataDir: string): DatabaseConfig | string {
  for (const prefix of ['sqlite:', 'file:']) {
    if (url.startsWith(prefix)) {
      const file = url.slice(prefix.length).replace(/^\/\/(?=\/)/, '');
      if (!file) return `DATABASE_URL: "${prefix}" needs a file path, e.g. ${prefix}${dataDir}/gateway.db`;
      return { kind: 'sqlite', file: file === ':memory:' ? file : path.resolve(file) };
    }
  }
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return 'DATABASE_URL is not a valid postgres:// URL';
    }
    const mode = parsed.searchParams.get('sslmode') ?? 'disable';
    if (mode !== 'disable' && mode !== 'require' && mode !== 'verify-full') {
      return `DATABASE_URL: sslmode must be disable, require or verify-full (got "${mode}")`;
    }
    const rootCert = parsed.searchParams.get('sslrootcert');
    parsed.searchParams.delete('sslmode');
    parsed.searchParams.delete('sslrootcert');
    return { kind: 'postgres', connectionString: parsed.toString(), sslMode: mode, sslRootCert: rootCert };
  }
  return 'DATABASE_URL must start with sqlite:, file:, postgres:// or postgresql://';
}
