import { createHash, createPublicKey } from 'node:crypto';
import ssh2 from 'ssh2';

export interface PublicKeyInfo {
  keyType: string;
  /** Normalised line: `<type> <base64> [comment]`. */
  line: string;
  comment: string;
  fingerprint: string;
}

const STANDARD_TYPES = new Set([
  'ssh-ed25519',
  'ssh-rsa',
  'ecdsa-sha2-nistp256',
  'ecdsa-sha2-nistp384',
  'ecdsa-sha2-nistp521',
]);
// ssh2 cannot parse security-key types, so for those the blob's own type name is checked instead.
const SECURITY_KEY_TYPES = new Set(['sk-ssh-ed25519@openssh.com', 'sk-ecdsa-sha2-nistp256@openssh.com']);

export const MIN_RSA_BITS = 2048;

export function fingerprintOf(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

function blobTypeName(blob: Buffer): string | null {
  if (blob.length < 4) return null;
  const length = blob.readUInt32BE(0);
  if (length > 64 || 4 + length > blob.length) return null;
  return blob.subarray(4, 4 + length).toString('latin1');
}

/** Splits an SSH wire-format blob into its length-prefixed strings, or null when it is not exactly that. */
function sshStrings(blob: Buffer): Buffer[] | null {
  const parts: Buffer[] = [];
  for (let at = 0; at < blob.length; ) {
    if (at + 4 > blob.length) return null;
    const length = blob.readUInt32BE(at);
    if (at + 4 + length > blob.length) return null;
    parts.push(blob.subarray(at + 4, at + 4 + length));
    at += 4 + length;
  }
  return parts;
}

/** The length-prefixed strings each key type's blob holds, exactly (OpenSSH refuses trailing data):
 * type, then e and n (rsa), the key (ed25519), curve and point (ecdsa), plus the application (sk-*). */
const BLOB_PARTS: Record<string, number> = {
  'ssh-ed25519': 2,
  'ssh-rsa': 3,
  'ecdsa-sha2-nistp256': 3,
  'ecdsa-sha2-nistp384': 3,
  'ecdsa-sha2-nistp521': 3,
  'sk-ssh-ed25519@openssh.com': 3,
  'sk-ecdsa-sha2-nistp256@openssh.com': 4,
};

/** ssh2 cannot parse security keys, so their key material is checked by shape. */
function validSecurityKey(keyType: string, parts: Buffer[]): boolean {
  if (keyType === 'sk-ssh-ed25519@openssh.com') return parts[1]!.length === 32 && parts[2]!.length > 0;
  return (
    parts[1]!.toString('latin1') === 'nistp256' &&
    parts[2]!.length === 65 &&
    parts[2]![0] === 4 &&
    parts[3]!.length > 0
  );
}

/** Parses one OpenSSH public key line, or returns why it is refused, worded to follow "The public key". */
export function parsePublicKey(input: string): PublicKeyInfo | string {
  const text = input.trim();
  if (text.includes('PRIVATE KEY')) return 'is a private key; send the public half (the .pub file)';
  if (text.includes('\n')) return 'must be a single public key line';
  const [keyType, base64, ...rest] = text.split(/\s+/);
  if (!keyType || !base64) return 'must look like "ssh-ed25519 AAAA... comment"';
  if (!STANDARD_TYPES.has(keyType) && !SECURITY_KEY_TYPES.has(keyType)) {
    return `has the key type "${keyType}", which is not accepted (use ed25519, ecdsa, rsa of at least ${MIN_RSA_BITS} bits, or sk-*)`;
  }
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(base64)) return 'has key data that is not base64';
  const blob = Buffer.from(base64, 'base64');
  if (blobTypeName(blob) !== keyType) return 'has key data that does not match its type';
  const parts = sshStrings(blob);
  if (!parts || parts.length !== BLOB_PARTS[keyType]) return 'has key data that is not a valid public key';
  const comment = rest.join(' ');
  if (STANDARD_TYPES.has(keyType)) {
    const parsed = ssh2.utils.parseKey(`${keyType} ${base64}`);
    if (parsed instanceof Error || Array.isArray(parsed))
      return 'has key data that is not a valid public key';
    if (keyType === 'ssh-rsa') {
      const details = createPublicKey(parsed.getPublicPEM()).asymmetricKeyDetails;
      const bits = details?.modulusLength ?? 0;
      if (bits < MIN_RSA_BITS)
        return `needs at least ${MIN_RSA_BITS} bits as an RSA key (this one has ${bits})`;
    }
  } else if (!validSecurityKey(keyType, parts)) {
    return 'has key data that is not a valid public key';
  }
  return {
    keyType,
    line: comment ? `${keyType} ${base64} ${comment}` : `${keyType} ${base64}`,
    comment,
    fingerprint: fingerprintOf(blob),
  };
}

/** A fresh ed25519 pair in OpenSSH format. */
export function generateEd25519(comment: string): { privateKey: string; publicKey: string } {
  for (;;) {
    const pair = ssh2.utils.generateKeyPairSync('ed25519', { comment });
    // ssh2 strips leading zero bytes from the public key, so about 1 pair in 256 comes out malformed
    // (a 31-byte key OpenSSH refuses, in both halves); such a pair is thrown away.
    if (typeof parsePublicKey(pair.public) !== 'string')
      return { privateKey: pair.private, publicKey: pair.public };
  }
}
