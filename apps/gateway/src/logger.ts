import pino, { type Logger } from 'pino';
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

export function createLogger(config: Pick<Config, 'logLevel' | 'logFormat'>): Logger {
  return pino({
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
  });
}
