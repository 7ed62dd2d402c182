import { createCipheriv } from 'node:crypto';

/**
 * VNC authentication (RFB security type 2) is DES. OpenSSL 3 keeps single DES in its legacy provider only, but
 * three-key DES with three equal keys is single DES: E(K, D(K, E(K, x))) = E(K, x).
 */
function des(key: Buffer, block: Buffer): Buffer {
  const cipher = createCipheriv('des-ede3-ecb', Buffer.concat([key, key, key]), null);
  cipher.setAutoPadding(false);
  return Buffer.concat([cipher.update(block), cipher.final()]);
}

/** VNC keys are the password's first 8 bytes, zero-padded, each with its bits in reverse order. */
function passwordKey(password: string): Buffer {
  const key = Buffer.alloc(8);
  Buffer.from(password, 'latin1').copy(key, 0, 0, 8);
  for (let at = 0; at < 8; at++) {
    let reversed = 0;
    for (let bit = 0; bit < 8; bit++) reversed |= ((key[at]! >> bit) & 1) << (7 - bit);
    key[at] = reversed;
  }
  return key;
}

/** The answer to a VNC server's 16-byte challenge. */
export function vncAuthResponse(password: string, challenge: Buffer): Buffer {
  return des(passwordKey(password), challenge);
}

/** TigerVNC's fixed key for password files (`vncpasswd`), in the standard DES bit order. */
const PASSWORD_FILE_KEY = Buffer.from('e84ad660c4721ae0', 'hex');

/** A password file as `vncpasswd` writes it and `Xtigervnc -PasswordFile` reads it: 8 bytes, obfuscated. */
export function vncPasswordFile(password: string): Buffer {
  const plain = Buffer.alloc(8);
  Buffer.from(password, 'latin1').copy(plain, 0, 0, 8);
  return des(PASSWORD_FILE_KEY, plain);
}
