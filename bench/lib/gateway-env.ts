import { randomBytes } from 'node:crypto';
import path from 'node:path';

/**
 * The environment of a gateway process a bench starts without Docker: nothing from the caller's shell but PATH,
 * the API on 127.0.0.1:`port`, no entry or SSH port, warnings only, and a Docker socket that does not exist.
 */
export function dockerFreeGatewayEnv(options: {
  dataDir: string;
  databaseUrl: string;
  port: number;
  adminPassword: string;
  /** Gateways sharing one database share it; one of their own otherwise. */
  jwtSecret?: string;
  extra?: Record<string, string>;
}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    ADMIN_JWT_SECRET: options.jwtSecret ?? randomBytes(36).toString('base64'),
    ADMIN_PASSWORD: options.adminPassword,
    DATA_DIR: options.dataDir,
    DATABASE_URL: options.databaseUrl,
    HTTP_HOST: '127.0.0.1',
    HTTP_PORT: String(options.port),
    ENTRY_PORT: '0',
    SSH_PROXY_PORT: '0',
    LOG_LEVEL: 'warn',
    DOCKER_SOCKET: path.join(options.dataDir, 'no-docker.sock'),
    ...options.extra,
  };
}
