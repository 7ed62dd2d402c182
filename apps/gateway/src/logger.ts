import pino, { type DestinationStream, type Logger } from 'pino';
import type { Config } from './config.js';

const REDACT = [
  'req.headers.authorization',
  'req.headers.cookie',
  'password',
  'new_password',
  'old_password',
  'ssh_pass',
  'private_key',
  'token',
  '*.password',
  '*.ssh_pass',
  '*.token',
  '*.private_key',
];

/** `destination` replaces stdout for JSON logs (tests read the lines). */
export function createLogger(
  config: Pick<Config, 'logLevel' | 'logFormat'>,
  destination?: DestinationStream,
): Logger {
  const options: pino.LoggerOptions = {
    level: config.logLevel,
    redact: { paths: REDACT, censor: '[redacted]' },
    serializers: {
      req: (req: { id?: string; method?: string; url?: string; ip?: string }) => ({
        id: req.id,
        method: req.method,
        url: req.url?.replace(/([?&]token=)[^&]*/g, '$1[redacted]'),
        remoteAddress: req.ip,
      }),
    },
    ...(config.logFormat === 'pretty'
      ? {
          transport: {
            target: 'pino-pretty',
            options: { translateTime: 'SYS:standard', ignore: 'pid,hostname' },
          },
        }
      : {}),
  };
  return destination && config.logFormat === 'json' ? pino(options, destination) : pino(options);
}
