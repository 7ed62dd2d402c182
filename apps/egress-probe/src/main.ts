import { ConfigError, parseProbeConfig, usage } from './config.js';
import { startProbe } from './probe.js';

async function main(): Promise<void> {
  let config: ReturnType<typeof parseProbeConfig>;
  try {
    config = parseProbeConfig(process.argv.slice(2), process.env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`${error.message}\n\n${usage}`);
    process.exit(64);
  }
  if (!config) {
    process.stdout.write(usage);
    return;
  }
  const probe = await startProbe(config);
  const { http, https, dns } = probe.ports;
  const where = (address: { host: string } | undefined, port: number | undefined) => {
    if (!address || port === undefined) return 'off';
    return address.host.includes(':') ? `[${address.host}]:${port}` : `${address.host}:${port}`;
  };
  process.stdout.write(
    `egress probe ready: http ${where(config.http, http)}, https ${where(config.https, https)}, ` +
      `dns ${where(config.dns, dns)} (udp+tcp), zone ${config.zone} -> ${config.answerAddress}\n`,
  );
  const stop = () => {
    probe.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((error: unknown) => {
  process.stderr.write(`egress probe failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
