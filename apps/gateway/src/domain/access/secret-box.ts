import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** Encrypts secrets at rest (SSH passwords, egress credentials) with AES-256-GCM under a key kept in DATA_DIR.
 * The key is separate from the JWT secret so rotating one never destroys the other. */
export class SecretBox {
  private constructor(private readonly key: Buffer) {}

  static readonly FILE_NAME = 'secrets.key';

  static fromKey(key: Buffer): SecretBox {
    if (key.length !== 32) throw new Error('secret key must be 32 bytes');
    return new SecretBox(key);
  }

  /** Loads `DATA_DIR/secrets.key`, creating it (mode 0600) on first start. */
  static openInDirectory(dataDir: string): SecretBox {
    const file = path.join(dataDir, SecretBox.FILE_NAME);
    if (!existsSync(file)) {
      mkdirSync(dataDir, { recursive: true, mode: 0o700 });
      writeFileSync(file, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
    }
    chmodSync(file, 0o600);
    const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64');
    if (key.length !== 32) throw new Error(`${file} does not hold a 32-byte base64 key`);
    return new SecretBox(key);
  }

  seal(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return `v1.${iv.toString('base64')}.${cipher.getAuthTag().toString('base64')}.${body.toString('base64')}`;
  }

  /** A secret of its own for `purpose`, the same on every gateway that shares the key, and never stored: HKDF,
   * so nothing derived tells anything about the key or about another purpose's secret. */
  derive(purpose: string, length = 32): Buffer {
    return Buffer.from(hkdfSync('sha256', this.key, Buffer.alloc(0), `cloud-cli-proxy ${purpose}`, length));
  }

  open(sealed: string): string {
    const [version, iv, tag, body] = sealed.split('.');
    if (version !== 'v1' || !iv || !tag || body === undefined)
      throw new Error('unknown sealed secret format');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64'));
    decipher.setAuthTag(Buffer.from(tag, 'base64'));
    return Buffer.concat([decipher.update(Buffer.from(body, 'base64')), decipher.final()]).toString('utf8');
  }
}
