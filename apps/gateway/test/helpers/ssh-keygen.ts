import { execFileSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface GeneratedKey {
  /** The `.pub` line as ssh-keygen wrote it (without the trailing newline). */
  publicKey: string;
  /** The OpenSSH private key file. */
  privateKey: string;
  /** `SHA256:...` as printed by `ssh-keygen -lf`. */
  fingerprint: string;
}

/** Real OpenSSH keys made with the system `ssh-keygen`, in a temp dir removed by `cleanup()`. */
export class KeyFactory {
  readonly dir = mkdtempSync(path.join(tmpdir(), 'ccp-keys-'));
  private counter = 0;

  generate(type: 'ed25519' | 'ecdsa' | 'rsa', bits?: number, comment = 'test@example'): GeneratedKey {
    const file = path.join(this.dir, `key${this.counter++}`);
    const args = ['-q', '-t', type, '-N', '', '-C', comment, '-f', file];
    if (bits) args.push('-b', String(bits));
    execFileSync('ssh-keygen', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    const publicKey = readFileSync(`${file}.pub`, 'utf8').trim();
    return { publicKey, privateKey: readFileSync(file, 'utf8'), fingerprint: this.fingerprint(publicKey) };
  }

  /** The fingerprint `ssh-keygen -lf` prints for a public key line. */
  fingerprint(publicKeyLine: string): string {
    const file = path.join(this.dir, `fp${this.counter++}.pub`);
    writeFileSync(file, `${publicKeyLine}\n`);
    const out = execFileSync('ssh-keygen', ['-l', '-E', 'sha256', '-f', file], { encoding: 'utf8' });
    const fingerprint = out.trim().split(/\s+/)[1];
    if (!fingerprint?.startsWith('SHA256:')) throw new Error(`unexpected ssh-keygen output: ${out}`);
    return fingerprint;
  }

  /** The public key line `ssh-keygen -y` derives from a private key (type and base64, no comment). */
  publicOf(privateKey: string): string {
    const file = path.join(this.dir, `priv${this.counter++}`);
    writeFileSync(file, privateKey.endsWith('\n') ? privateKey : `${privateKey}\n`, { mode: 0o600 });
    const out = execFileSync('ssh-keygen', ['-y', '-f', file], { encoding: 'utf8' });
    return out.trim().split(/\s+/).slice(0, 2).join(' ');
  }

  cleanup(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function sshString(data: Buffer | string): Buffer {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'latin1') : data;
  const length = Buffer.alloc(4);
  length.writeUInt32BE(bytes.length);
  return Buffer.concat([length, bytes]);
}

/** Security-key public key lines cannot be made without hardware; build them from their wire format. */
export function securityKeyLines(): { ed25519: string; ecdsa: string } {
  const ed = generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' });
  const edBlob = Buffer.concat([
    sshString('sk-ssh-ed25519@openssh.com'),
    sshString(Buffer.from(ed.x!, 'base64url')),
    sshString('ssh:'),
  ]);
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' });
  const point = Buffer.concat([
    Buffer.from([4]),
    Buffer.from(ec.x!, 'base64url'),
    Buffer.from(ec.y!, 'base64url'),
  ]);
  const ecBlob = Buffer.concat([
    sshString('sk-ecdsa-sha2-nistp256@openssh.com'),
    sshString('nistp256'),
    sshString(point),
    sshString('ssh:'),
  ]);
  return {
    ed25519: `sk-ssh-ed25519@openssh.com ${edBlob.toString('base64')} yubikey`,
    ecdsa: `sk-ecdsa-sha2-nistp256@openssh.com ${ecBlob.toString('base64')} yubikey`,
  };
}
