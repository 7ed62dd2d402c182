import Type, { type Static } from 'typebox';
import { defineFormat, positiveWhole } from '../../shared/settings.js';

/** Accounts and sign-in (docs/configuration.md is written from these). */
export const AccessVariables = Type.Object({
  ADMIN_USERNAME: Type.String({
    default: 'admin',
    pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{2,49}$',
    typeText: '3 to 50 of A-Z a-z 0-9 . _ -',
    description: 'Name of the first admin account',
    problem: 'must be 3 to 50 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit',
  }),
  ADMIN_PASSWORD: Type.Optional(
    Type.String({
      minLength: 8,
      secret: true,
      description: 'Password of the first admin, used only when that account does not exist yet',
      problem: 'must be at least 8 characters',
    }),
  ),
  ADMIN_JWT_SECRET: Type.String({
    minLength: 32,
    secret: true,
    description: 'Signs tokens; changing it ends every issued token',
    problem: 'must be at least 32 characters',
    missing: 'is required (run deploy/setup.sh to generate one)',
  }),
  TOKEN_TTL: Type.String({
    format: 'duration',
    default: '12h',
    description: 'Token lifetime: seconds, or a number with `s`, `m`, `h`, `d`',
    problem: 'must be a duration such as 12h, 30m or 3600 (got "{got}")',
  }),
  RATE_LIMIT_IPV6_PREFIX: Type.Integer({
    minimum: 1,
    maximum: 128,
    default: 64,
    description:
      "Leading bits of an IPv6 client address the failure limits count as one caller (a /64 is one subscriber's); IPv4 counts per address",
    problem: 'must be a prefix length from 1 to 128, such as 64 (got "{got}")',
  }),
  EXPIRY_SWEEP_SECONDS: positiveWhole(30, 'How often expired accounts are swept, in seconds (at most 60)'),
});
export type AccessVariables = Static<typeof AccessVariables>;

/** Parses a duration such as `12h`, `30m`, `45s`, `2d` or a bare number of seconds. */
export function parseDuration(text: string): number | null {
  const match = /^(\d+)\s*(s|m|h|d)?$/.exec(text.trim());
  if (!match) return null;
  const unit = { s: 1, m: 60, h: 3600, d: 86400 }[(match[2] ?? 's') as 's' | 'm' | 'h' | 'd'];
  const seconds = Number(match[1]) * unit;
  return seconds > 0 ? seconds : null;
}

defineFormat('duration', 'duration (`12h`, `30m`, `3600`)', (text) => parseDuration(text) !== null);
