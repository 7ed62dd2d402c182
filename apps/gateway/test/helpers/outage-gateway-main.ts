/**
 * The gateway's own start-up (src/main.ts) for tests that run it as a process they can kill -9, with two test
 * hooks: exits named in the JSON file `CCP_TEST_DOWN_EXITS` (a list of addresses) fail the egress test, and
 * SIGUSR2 runs one health round (`checkUpstreams`) and prints `health round done` (or `health round failed`).
 * Run it with `node --conditions=source --import tsx`.
 */
import { readFileSync } from 'node:fs';
import { loadConfig, readEnvironment } from '../../src/config.js';
import { egressTesterFor } from '../../src/egress/egress-tester.js';
import { v2rayEngine } from '../../src/egress/v2ray-engine.js';
import { createGateway } from '../../src/gateway.js';
import { createLogger } from '../../src/logger.js';
import { HEALTH_ROUND_DONE, TesterWithOutages } from './outages.js';

class TesterWithDownFile extends TesterWithOutages {
  constructor(private readonly file: string) {
    super();
  }
  protected override isDown(declaredIp: string): boolean {
    try {
      return (JSON.parse(readFileSync(this.file, 'utf8')) as string[]).includes(declaredIp);
    } catch {
      return false;
    }
  }
}

async function main(): Promise<void> {
  const config = loadConfig(readEnvironment());
  const logger = createLogger(config);
  const file = process.env.CCP_TEST_DOWN_EXITS;
  if (!file) throw new Error('CCP_TEST_DOWN_EXITS is not set');
  const tester = new TesterWithDownFile(file);
  tester.real = egressTesterFor(config.egress, v2rayEngine);
  const gateway = await createGateway(config, { logger, egressTester: tester });
  await gateway.listen();
  let round = Promise.resolve();
  process.on('SIGUSR2', () => {
    round = round.then(() =>
      gateway.lifecycle.checkUpstreams(gateway.access.system('test: health round')).then(
        () => void process.stdout.write(`${HEALTH_ROUND_DONE}\n`),
        (error: unknown) => void process.stdout.write(`health round failed: ${String(error)}\n`),
      ),
    );
  });
  process.on('SIGTERM', () => {
    gateway.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
}

main().catch((error: unknown) => {
  process.stderr.write(
    `gateway failed to start: ${error instanceof Error ? error.message : String(error)}\n`,
  );
  process.exit(1);
});
