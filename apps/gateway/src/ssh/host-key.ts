import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { generateEd25519 } from '../domain/users/ssh-public-key.js';

export const HOST_KEY_FILE = 'ssh_host_ed25519_key';

/** The proxy's ed25519 host key in `DATA_DIR`, made on first start and kept, so clients' known_hosts stay valid. */
export function loadOrCreateHostKey(dataDir: string): string {
  const file = path.join(dataDir, HOST_KEY_FILE);
  if (!existsSync(file)) {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    try {
      writeFileSync(file, generateEd25519('cloud-cli-proxy').privateKey, { mode: 0o600, flag: 'wx' });
    } catch (error) {
      // Another process created it first; theirs is the key.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
  chmodSync(file, 0o600);
  return readFileSync(file, 'utf8');
}
