import pino, { type DestinationStream, type Logger } from 'pino';
import Type, { type Static } from 'typebox';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** What the gateway logs and how (docs/configuration.md is written from these). */
export const LoggingVariables = Type.Object({
  LOG_LEVEL: Type.Union(
    LOG_LEVELS.map((level) => Type.Literal(level)),
    {
      default: 'info',
      description: 'The least severe log lines written',
      problem: `must be one of ${LOG_LEVELS.join(', ')}`,
    },
  ),
  LOG_FORMAT: Type.Union([Type.Literal('json'), Type.Literal('pretty')], {
    default: 'json',
    description: '`json` (one object a line, with request ids) or `pretty`',
    problem: 'must be json or pretty',
  }),
});
export type LoggingVariables = Static<typeof LoggingVariables>;

export type LogFormat = LoggingVariables['LOG_FORMAT'];

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

const decodedName = (name: string): string => {
  try {
    return decodeURIComponent(name.replace(/\+/g, ' ')).trim().toLowerCase();
  } catch {
    return name.toLowerCase();
  }
};

/** Query parameters that carry a secret: an API token (refused but still sent by some), a desktop ticket. */
const SECRET_PARAMETERS = new Set(['token', 'ticket']);

/** A URL as it may be logged: the value of every secret parameter is replaced, whatever case or percent-encoding
 * spells its name (the query parser would decode `%74oken` to `token`). */
export function redactUrl(logged: string): string {
  // A desktop pass in its path (vnc-access.ts), and in the page's `path=` naming its stream.
  const url = logged.replace(/(vnc(?:\/|%2F)pass(?:\/|%2F))[^/?&%]+/gi, '$1[redacted]');
  const at = url.indexOf('?');
  if (at < 0) return url;
  const query = url
    .slice(at + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = eq < 0 ? pair : pair.slice(0, eq);
      return SECRET_PARAMETERS.has(decodedName(name)) ? `${name}=[redacted]` : pair;
    })
    .join('&');
  return `${url.slice(0, at)}?${query}`;
}

/** `destination` replaces stdout for JSON logs (tests read the lines). */
export function createLogger(
  config: { logLevel: string; logFormat: LogFormat },
  destination?: DestinationStream,
): Logger {
  const options: pino.LoggerOptions = {
    level: config.logLevel,
    redact: { paths: REDACT, censor: '[redacted]' },
    serializers: {
      req: (req: { id?: string; method?: string; url?: string; ip?: string }) => ({
        id: req.id,
        method: req.method,
        url: req.url === undefined ? undefined : redactUrl(req.url),
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
