import type { Algorithms } from 'ssh2';

/**
 * What the SSH proxy offers: what current OpenSSH offers by default, less what ssh-audit faults (NIST curves,
 * SHA-1, encrypt-and-MAC), in order of preference. OpenSSH 7.4 and later, PuTTY 0.76 and later, VS Code
 * Remote-SSH (the system's OpenSSH) and JetBrains' clients all find a match. ssh2 adds the strict key exchange
 * marker (kex-strict-s-v00@openssh.com, the Terrapin fix) by itself.
 */
export const SSH_ALGORITHMS: Algorithms = {
  kex: [
    'curve25519-sha256',
    'curve25519-sha256@libssh.org',
    // For clients without curve25519: the large fixed groups (ssh-audit warns on group14's 2048 bits).
    'diffie-hellman-group16-sha512',
    'diffie-hellman-group18-sha512',
  ],
  serverHostKey: ['ssh-ed25519'],
  cipher: [
    'chacha20-poly1305@openssh.com',
    'aes256-gcm@openssh.com',
    'aes128-gcm@openssh.com',
    'aes256-ctr',
    'aes192-ctr',
    'aes128-ctr',
  ],
  // Encrypt-then-MAC only.
  hmac: ['hmac-sha2-256-etm@openssh.com', 'hmac-sha2-512-etm@openssh.com'],
  compress: ['none'],
};

/** The version string clients see: neither the library nor its version (nothing for a scanner to match). */
export const SSH_IDENT = 'cloud-cli-proxy';
