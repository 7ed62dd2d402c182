import { createHash } from 'node:crypto';
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Host keys pinned on first use: one `host:port SHA256:<base64>` line per SSH proxy. A later key that differs
 * is refused, never replaced silently.
 */
export class KnownHosts {
  constructor(readonly file: string) {}

  static fingerprint(key: Buffer): string {
    return `SHA256:${createHash('sha256').update(key).digest('base64').replace(/=+$/, '')}`;
  }

  private pinned(endpoint: string): string | undefined {
    let text = '';
    try {
      text = readFileSync(this.file, 'utf8');
    } catch {
      return undefined;
    }
    for (const line of text.split('\n')) {
      const [name, fingerprint] = line.trim().split(/\s+/);
      if (name === endpoint && fingerprint) return fingerprint;
    }
    return undefined;
  }

  /** 'pinned' (first use, now remembered), 'match', or the pinned fingerprint that the key does not match. */
  check(
    endpoint: string,
    key: Buffer,
  ): { result: 'pinned' | 'match' } | { result: 'mismatch'; pinned: string } {
    const fingerprint = KnownHosts.fingerprint(key);
    const pinned = this.pinned(endpoint);
    if (pinned === fingerprint) return { result: 'match' };
    if (pinned) return { result: 'mismatch', pinned };
    mkdirSync(path.dirname(this.file), { recursive: true, mode: 0o700 });
    appendFileSync(this.file, `${endpoint} ${fingerprint}\n`, { mode: 0o600 });
    return { result: 'pinned' };
  }
}
