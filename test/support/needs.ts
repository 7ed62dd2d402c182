/**
 * What a test needs from the machine, decided in one place: `describe(..., { skip: needs('lab') })`.
 * The answer is a reason to skip (printed in the run's summary) or false. Every program a test runs that is not
 * Node.js, node_modules or the shell and core utilities every Debian has is a need here, so a machine without it
 * skips the test and says what to install, instead of failing it.
 *
 * Test files come in two tiers (scripts/lib.sh `test_files`). The unit tier, `*.unit.test.ts` (`npm run
 * test:unit`), needs nothing: not a tool, root, an engine, a database server nor a gateway boot, so it runs in
 * seconds after `npm ci`. Asking for a need there is a mistake of the file's tier, and fails the file.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';

/** Programs tests run, each with the Debian package that has it (scripts/test-packages.txt lists them all). */
const TOOLS = {
  dash: 'dash',
  git: 'git',
  openssl: 'openssl',
  plink: 'putty-tools',
  rsync: 'rsync',
  shellcheck: 'shellcheck',
  ssh: 'openssh-client',
  'ssh-audit': 'ssh-audit',
  'ssh-keygen': 'openssh-client',
  sshpass: 'sshpass',
  v2ray: 'v2ray',
} as const;

export type Tool = keyof typeof TOOLS;

export type Need = 'root' | 'lab' | 'docker' | 'postgres' | 'browser' | 'nft' | 'sftp-server' | 'fuse' | Tool;

const UNIT_TIER = process.env.TEST_TIER === 'unit';

const isRoot = () => process.getuid?.() === 0;

function onPath(command: string): boolean {
  return (process.env.PATH ?? '').split(':').some((dir) => dir !== '' && existsSync(path.join(dir, command)));
}

function missing(need: Need): string | undefined {
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
    case 'sftp-server':
      return existsSync('/usr/lib/openssh/sftp-server') ? undefined : 'needs openssh-sftp-server';
    case 'fuse':
      if (!existsSync('/dev/fuse')) return 'needs /dev/fuse';
      return onPath('sshfs') && onPath('fusermount3') ? undefined : 'needs sshfs and fusermount3';
    case 'nft':
      if (!onPath('nft')) return 'nft is not installed';
      return isRoot() ? undefined : 'nft -c needs root';
    default:
      return onPath(need) ? undefined : `needs ${need} (apt-get install ${TOOLS[need]})`;
  }
}

/** The first thing missing for a test that needs all of `what`, or false when it can run here. */
export function needs(...what: Need[]): string | false {
  if (UNIT_TIER && what.length > 0)
    throw new Error(
      `a unit-tier test needs ${what.join(', ')}: the unit tier runs on Node.js alone; ` +
        'name the file *.test.ts (integration tier) instead of *.unit.test.ts',
    );
  for (const need of what) {
    const reason = missing(need);
    if (reason) return reason;
  }
  return false;
}
