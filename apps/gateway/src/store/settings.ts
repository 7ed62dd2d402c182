export type SslMode = 'disable' | 'require' | 'verify-full';

/** Which database the store opens (DATABASE_URL): an SQLite file, or PostgreSQL with its TLS mode. */
export type DatabaseConfig =
  | { kind: 'sqlite'; file: string }
  | { kind: 'postgres'; connectionString: string; sslMode: SslMode; sslRootCert: string | null };
