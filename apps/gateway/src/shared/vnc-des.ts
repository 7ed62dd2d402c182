import { createCipheriv } from 'node:crypto';

/**
 * VNC's DES, which the desktop's password file (runtime/) and its challenge answer (vnc/) both use. OpenSSL 3 keeps
 * single DES in its legacy provider only, but three-key DES with three equal keys is single DES:
 * E(K, D(K, E(K, x))) = E(K, x).
 */
export function vncDes(key: Buffer, block: Buffer): Buffer {
  const cipher = createCipheriv('des-ede3-ecb', Buffer.concat([key, key, key]), null);
  cipher.setAutoPadding(false);
  return Buffer.concat([cipher.update(block), cipher.final()]);
}

/** TigerVNC's fixed key for password files (`vncpasswd`), in the standard DES bit order. */
const PASSWORD_FILE_KEY = Buffer.from('e84ad660c4721ae0', 'hex');

/** A password file as `vncpasswd` writes it and `Xtigervnc -PasswordFile` reads it: 8 bytes, obfuscated. */
export function vncPasswordFile(password: string): Buffer {
  const plain = Buffer.alloc(8);
  Buffer.from(password, 'latin1').copy(plain, 0, 0, 8);
  return vncDes(PASSWORD_FILE_KEY, plain);
}
