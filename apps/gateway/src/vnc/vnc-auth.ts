import { vncDes } from '../shared/vnc-des.js';

/** VNC authentication (RFB security type 2): keys are the password's first 8 bytes, zero-padded, each with its
 * bits in reverse order. */
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
  return vncDes(passwordKey(password), challenge);
}
