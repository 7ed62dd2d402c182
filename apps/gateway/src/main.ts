import { ConfigError, loadConfig, readEnvironment } from './config.js';
import { plainHttpNotice } from './domain/entry/download-transport.js';
import { describeVerification } from './egress/egress-verification.js';
import { createGateway } from './gateway.js';
import { createLogger } from './logger.js';
import { heapFlagsWarning } from './node-flags.js';

/** package.json's engines: better-sqlite3 13 crashes the process on an older Node.js (a segfault, no message). */
const NODE_MIN_MAJOR = 22;

async function main(): Promise<void> {
  if (Number(process.versions.node.split('.')[0]) < NODE_MIN_MAJOR) {
    process.stderr.write(
      `cloud-cli-proxy needs Node.js ${NODE_MIN_MAJOR} or newer, and ${process.execPath} is ${process.version}: ` +
        'start it with the node that deploy/setup.sh installed or found (`node` on PATH after set-up; ' +
        '/usr/local/bin/node where the system had an older one)\n',
    );
    process.exit(78);
  }
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig(readEnvironment());
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(78);
    }
    throw error;
  }
  const logger = createLogger(config);
  // Before listening, so the line is in the log by the time the gateway answers.
  logger.info(describeVerification(config.egress));
  const heapFlags = heapFlagsWarning();
  if (heapFlags) logger.warn(heapFlags);
  const plainHttp = plainHttpNotice(config.publicApiUrl);
  if (plainHttp) logger.warn(plainHttp);
  const gateway = await createGateway(config, { logger });
  await gateway.listen();
  logger.info(
    { api: config.publicApiUrl, database: config.database.kind, dataDir: config.dataDir },
    `gateway listening on ${config.httpHost}:${config.httpPort}`,
  );

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping');
    const force = setTimeout(() => {
      logger.error('shutdown took longer than 10 s; exiting');
      process.exit(1);
    }, 10_000);
    force.unref();
    gateway.close().then(
      () => {
        logger.info('stopped');
        logger.flush();
        process.exit(0);
      },
      (error: unknown) => {
        logger.error({ err: error }, 'error while stopping');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((error: unknown) => {
  process.stderr.write(
    `gateway failed to start: ${error instanceof Error ? error.message : String(error)}\n`,
  );
  process.exit(1);
});
