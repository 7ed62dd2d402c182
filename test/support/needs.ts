/**
 * What a test file needs from the machine, decided in one place: `describe(..., { skip: needs('lab') })`.
 * The answer is a reason to skip (printed in the run's summary) or false.
 *
 * `TEST_TIER=unit` (npm run test:unit) is the fast tier: it skips everything that needs more than Node.js and
 * SQLite, so it runs in seconds without root, Docker, PostgreSQL or a browser.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';

export type Need =
  | 'root'
  | 'lab'
  | 'docker'
  | 'postgres'
  | 'browser'
  | 'nft'
  | 'v2ray'
  | 'sftp-server'
  | 'fuse';

export const UNIT_TIER = process.env.TEST_TIER === 'unit';

const isRoot = () => process.getuid?.() === 0;

function onPath(command: string): boolean {
  return (process.env.PATH ?? '').split(':').some((dir) => dir !== '' && existsSync(path.join(dir, command)));
}

function missing(need: Need): string | undefined {
  if (UNIT_TIER) return `unit tier: needs ${need}`;
  switch (need) {
    case 'root':
      return isRoot() ? undefined : 'needs root';
    case 'lab':
      if (process.platform !== 'linux') return 'the network lab needs Linux';
      return isRoot() ? undefined : 'the network lab needs root (ip netns)';
    case 'docker':
      if (!isRoot()) return 'needs root (Docker, nsenter)';
      return onPath('docker') ? undefined : 'needs the Docker engine (scripts/docker.sh ensure)';
    case 'postgres':
      return (process.env.TEST_DATABASES ?? 'sqlite,postgres').includes('postgres')
        ? undefined
        : 'TEST_DATABASES leaves PostgreSQL out';
    case 'browser':
      return existsSync('/usr/bin/chromium') ? undefined : 'needs Debian chromium (/usr/bin/chromium)';
    case 'v2ray':
      return onPath('v2ray') ? undefined : 'needs the tunnel engine (apt-get install v2ray)';
    case 'sftp-server':
      return existsSync('/usr/lib/openssh/sftp-server') ? undefined : 'needs openssh-sftp-server';
    case 'fuse':
      if (!existsSync('/dev/fuse')) return 'needs /dev/fuse';
      return onPath('sshfs') && onPath('fusermount3') ? undefined : 'needs sshfs and fusermount3';
    case 'nft':
      if (!onPath('nft')) return 'nft is not installed';
      return isRoot() ? undefined : 'nft -c needs root';
  }
}

/** The first thing missing for a test that needs all of `what`, or false when it can run here. */
export function needs(...what: Need[]): string | false {
  for (const need of what) {
    const reason = missing(need);
    if (reason) return reason;
  }
  return false;
}
