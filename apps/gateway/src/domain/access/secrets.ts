import { randomBytes, randomInt, scrypt, timingSafeEqual } from 'node:crypto';
import pLimit from 'p-limit';

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
/** Short IDs avoid look-alikes (0/o, 1/l/i) so they survive being read aloud or typed from a screen. */
const SHORT_ID_ALPHABET = 'abcdefghjkmnpqrstuvwxyz23456789';

function randomFrom(alphabet: string, length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[randomInt(alphabet.length)];
  return out;
}

/** Letters and digits only, so generated passwords never need shell quoting. */
export const generatePassword = (length = 20): string => randomFrom(ALNUM, length);

export const generateShortId = (): string => randomFrom(SHORT_ID_ALPHABET, 8);

export const SHORT_ID_PATTERN = /^[a-hjkmnp-z2-9]{8}$/;

// scrypt with N=2^15, r=8 (32 MiB per hash): memory-hard, about 50-100 ms on a 2-core machine.
const SCRYPT = { N: 32768, r: 8, p: 1, maxmem: 64 * 1024 * 1024 };
const KEY_LENGTH = 32;

// Each hash takes 32 MiB and a thread for a while; a burst of logins waits its turn instead of exhausting both.
const hashing = pLimit(2);

function derive(password: string, salt: Buffer, params = SCRYPT): Promise<Buffer> {
  return hashing(
    () =>
      new Promise<Buffer>((resolve, reject) => {
        scrypt(password.normalize('NFC'), salt, KEY_LENGTH, params, (err, key) =>
          err ? reject(err) : resolve(key),
        );
      }),
  );
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt);
  return `scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, key] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !key) return false;
  const expected = Buffer.from(key, 'base64');
  const params = { N: Number(n), r: Number(r), p: Number(p), maxmem: SCRYPT.maxmem };
  const actual = await derive(password, Buffer.from(salt, 'base64'), params);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

let dummyHash: Promise<string> | null = null;

/** Spends the same work as a real verification, so unknown usernames answer in about the same time. */
export async function verifyAgainstNothing(password: string): Promise<false> {
  dummyHash ??= hashPassword(generatePassword(24));
  await verifyPassword(password, await dummyHash);
  return false;
}
