import { ConfigError, loadConfig, readEnvironment } from './config.js';
import { describeVerification } from './egress/egress-verification.js';
import { createGateway } from './gateway.js';
import { createLogger } from './logger.js';

async function main(): Promise<void> {
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
