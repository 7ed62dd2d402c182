import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type Action, type DecideContext, decide } from '../src/hot-sync-decide.js';
import type { Base } from '../src/hot-sync-history.js';
import { type Entry, signature } from '../src/hot-sync-tree.js';

const REL = 'src/a.txt';
const CONTEXT: DecideContext = { rel: REL, coldRoot: '/cold', maxFileBytes: 1000, deletionsHeld: false };

// Local times are milliseconds, workspace times whole seconds, as the scanners give them.
const localFile: Entry = { type: 'file', size: 10, mtime: 5000, mode: 0o644 };
const localEdited: Entry = { type: 'file', size: 12, mtime: 9000, mode: 0o644 };
const localBig: Entry = { type: 'file', size: 5000, mtime: 5000, mode: 0o644 };
const remoteFile: Entry = { type: 'file', size: 10, mtime: 5, mode: 0o644 };
const remoteEdited: Entry = { type: 'file', size: 14, mtime: 8, mode: 0o644 };
const dir: Entry = { type: 'dir', ignored: false, mode: 0o755 };
const ignoredDir: Entry = { type: 'dir', ignored: true, mode: 0o755 };
const ownColdLink: Entry = { type: 'link', target: `/cold/${REL}` };
const movedColdLink: Entry = { type: 'link', target: '/cold/src/b.bin' };
const link: Entry = { type: 'link', target: 'elsewhere' };
const ALLOWED =
  'a link made from the workspace must stay within the folder (a relative target that goes down, or starts with no more "../" than its folder is deep, as npm\'s node_modules/.bin links do)';
const otherLink: Entry = { type: 'link', target: 'somewhere else' };

/** The base both sides agreed on when the local side was `l` and the workspace `r`. */
const synced = (l: Entry | undefined, r: Entry | undefined): Base => ({
  local: signature(l) ?? '',
  remote: signature(r) ?? '',
});

interface Row {
  what: string;
  local: Entry | undefined;
  remote: Entry | undefined;
  base: Base | undefined;
  deletionsHeld?: boolean;
  action: Action;
}

const rows: Row[] = [
  // Gone from both sides.
  {
    what: 'missing on both sides, once synced',
    local: undefined,
    remote: undefined,
    base: synced(localFile, remoteFile),
    action: { kind: 'forget' },
  },
  {
    what: 'missing on both sides, never synced',
    local: undefined,
    remote: undefined,
    base: undefined,
    action: { kind: 'forget' },
  },

  // Ignored folders belong to this machine.
  {
    what: 'ignored folder, linked in the workspace',
    local: ignoredDir,
    remote: ownColdLink,
    base: undefined,
    action: { kind: 'record' },
  },
  {
    what: 'ignored folder, nothing in the workspace',
    local: ignoredDir,
    remote: undefined,
    base: undefined,
    action: { kind: 'push' },
  },
  {
    what: 'ignored folder, something else in the workspace',
    local: ignoredDir,
    remote: dir,
    base: undefined,
    action: {
      kind: 'leave',
      problem: `${REL} in the workspace is not the link to the local folder; left as it is`,
    },
  },
  {
    what: 'ignored folder in the workspace only',
    local: undefined,
    remote: ignoredDir,
    base: undefined,
    action: { kind: 'none' },
  },

  // The workspace's link to this path's own sshfs copy.
  {
    what: 'big file, linked in the workspace',
    local: localBig,
    remote: ownColdLink,
    base: undefined,
    action: { kind: 'record' },
  },
  {
    what: 'linked file now small: copied again',
    local: localFile,
    remote: ownColdLink,
    base: synced(localBig, ownColdLink),
    action: { kind: 'push' },
  },
  {
    what: 'linked file deleted locally: link removed',
    local: undefined,
    remote: ownColdLink,
    base: synced(localBig, ownColdLink),
    action: { kind: 'push' },
  },

  // Unchanged.
  {
    what: 'file unchanged on both sides',
    local: localFile,
    remote: remoteFile,
    base: synced(localFile, remoteFile),
    action: { kind: 'none' },
  },
  {
    what: 'folder unchanged on both sides',
    local: dir,
    remote: dir,
    base: synced(dir, dir),
    action: { kind: 'none' },
  },
  {
    what: 'link unchanged on both sides',
    local: link,
    remote: link,
    base: synced(link, link),
    action: { kind: 'none' },
  },

  // Changed on one side.
  {
    what: 'file edited locally',
    local: localEdited,
    remote: remoteFile,
    base: synced(localFile, remoteFile),
    action: { kind: 'push' },
  },
  {
    what: 'file edited in the workspace',
    local: localFile,
    remote: remoteEdited,
    base: synced(localFile, remoteFile),
    action: { kind: 'pull' },
  },
  {
    what: 'file deleted locally',
    local: undefined,
    remote: remoteFile,
    base: synced(localFile, remoteFile),
    action: { kind: 'push' },
  },
  {
    what: 'file deleted in the workspace',
    local: localFile,
    remote: undefined,
    base: synced(localFile, remoteFile),
    action: { kind: 'pull' },
  },
  {
    what: 'file deleted in the workspace while deletions are held',
    local: localFile,
    remote: undefined,
    base: synced(localFile, remoteFile),
    deletionsHeld: true,
    action: { kind: 'hold' },
  },
  {
    what: 'folder deleted locally',
    local: undefined,
    remote: dir,
    base: synced(dir, dir),
    action: { kind: 'push' },
  },
  {
    what: 'folder deleted in the workspace',
    local: dir,
    remote: undefined,
    base: synced(dir, dir),
    action: { kind: 'pull' },
  },

  // Type changed on one side.
  {
    what: 'file made a folder locally',
    local: dir,
    remote: remoteFile,
    base: synced(localFile, remoteFile),
    action: { kind: 'push' },
  },
  {
    what: 'file made a link locally',
    local: link,
    remote: remoteFile,
    base: synced(localFile, remoteFile),
    action: { kind: 'push' },
  },
  {
    what: 'file made a folder in the workspace',
    local: localFile,
    remote: dir,
    base: synced(localFile, remoteFile),
    action: { kind: 'pull' },
  },
  {
    what: 'file made a link in the workspace',
    local: localFile,
    remote: link,
    base: synced(localFile, remoteFile),
    action: { kind: 'pull' },
  },
  {
    what: 'folder made a file in the workspace',
    local: dir,
    remote: remoteFile,
    base: synced(dir, dir),
    action: { kind: 'pull' },
  },
  {
    what: 'big file moved in the workspace (link kept)',
    local: localBig,
    remote: movedColdLink,
    base: synced(localBig, movedColdLink),
    action: { kind: 'none' },
  },

  // New on one side (never synced).
  { what: 'new local file', local: localFile, remote: undefined, base: undefined, action: { kind: 'push' } },
  { what: 'new local folder', local: dir, remote: undefined, base: undefined, action: { kind: 'push' } },
  {
    what: 'new workspace file',
    local: undefined,
    remote: remoteFile,
    base: undefined,
    action: { kind: 'pull' },
  },
  { what: 'new workspace link', local: undefined, remote: link, base: undefined, action: { kind: 'pull' } },
  {
    what: 'new workspace link, absolute: not made here',
    local: undefined,
    remote: { type: 'link', target: '/home/user/.ssh' },
    base: undefined,
    action: {
      kind: 'leave',
      problem: `${REL} in the workspace: ${ALLOWED}: its target "/home/user/.ssh" is absolute; not copied`,
    },
  },
  {
    what: 'workspace link changed to climb out: not made here',
    local: link,
    remote: { type: 'link', target: 'up/../../.ssh' },
    base: synced(link, link),
    action: {
      kind: 'leave',
      problem: `${REL} in the workspace: ${ALLOWED}: its target "up/../../.ssh" has ".." after a name; not copied`,
    },
  },
  {
    what: 'new workspace link climbing to a sibling folder (as npm makes): made here',
    local: undefined,
    remote: { type: 'link', target: '../lib/a.js' },
    base: undefined,
    action: { kind: 'pull' },
  },
  {
    what: 'new workspace link climbing above the folder: not made here',
    local: undefined,
    remote: { type: 'link', target: '../../.ssh' },
    base: undefined,
    action: {
      kind: 'leave',
      problem: `${REL} in the workspace: ${ALLOWED}: its target "../../.ssh" climbs 2 folders from one 1 deep; not copied`,
    },
  },
  {
    what: 'new workspace file, deletions held',
    local: undefined,
    remote: remoteFile,
    base: undefined,
    deletionsHeld: true,
    action: { kind: 'pull' },
  },

  // Changed on both sides.
  {
    what: 'deleted in the workspace, edited locally',
    local: localEdited,
    remote: undefined,
    base: synced(localFile, remoteFile),
    action: {
      kind: 'push',
      notice: `${REL} was deleted in the workspace but changed locally; the local file is kept`,
    },
  },
  {
    what: 'deleted in the workspace, edited locally, deletions held',
    local: localEdited,
    remote: undefined,
    base: synced(localFile, remoteFile),
    deletionsHeld: true,
    action: {
      kind: 'push',
      notice: `${REL} was deleted in the workspace but changed locally; the local file is kept`,
    },
  },
  {
    what: 'deleted locally, edited in the workspace',
    local: undefined,
    remote: remoteEdited,
    base: synced(localFile, remoteFile),
    action: {
      kind: 'pull',
      notice: `${REL} was deleted locally but changed in the workspace; it is restored locally`,
    },
  },
  {
    what: 'file edited on both sides',
    local: localEdited,
    remote: remoteEdited,
    base: synced(localFile, remoteFile),
    action: { kind: 'conflict', local: localEdited, remote: remoteEdited },
  },
  {
    what: 'file on both sides, never synced',
    local: localFile,
    remote: remoteFile,
    base: undefined,
    action: { kind: 'conflict', local: localFile, remote: remoteFile },
  },
  {
    what: 'local folder, workspace file, never synced',
    local: dir,
    remote: remoteFile,
    base: undefined,
    action: { kind: 'conflict', local: dir, remote: remoteFile },
  },
  {
    what: 'file edited locally, big file moved onto it in the workspace',
    local: localEdited,
    remote: movedColdLink,
    base: synced(localFile, remoteFile),
    action: { kind: 'conflict', local: localEdited, remote: movedColdLink },
  },
  {
    what: 'folder on both sides, never synced',
    local: dir,
    remote: dir,
    base: undefined,
    action: { kind: 'record' },
  },
  {
    what: 'same link on both sides, never synced',
    local: link,
    remote: link,
    base: undefined,
    action: { kind: 'record' },
  },
  {
    what: 'local file, workspace folder, never synced',
    local: localFile,
    remote: dir,
    base: undefined,
    action: { kind: 'leave', problem: `${REL} is a folder in the workspace but not locally; left as it is` },
  },
  {
    what: 'local file, ignored folder in the workspace, never synced',
    local: localFile,
    remote: ignoredDir,
    base: undefined,
    action: { kind: 'leave', problem: `${REL} is a folder in the workspace but not locally; left as it is` },
  },
  {
    what: 'local file, workspace link, never synced',
    local: localFile,
    remote: link,
    base: undefined,
    action: {
      kind: 'push',
      notice: `${REL}: the workspace's link (to elsewhere) is replaced by the local version`,
    },
  },
  {
    what: 'links to different targets, both changed',
    local: otherLink,
    remote: link,
    base: synced(localFile, remoteFile),
    action: {
      kind: 'push',
      notice: `${REL}: the workspace's link (to elsewhere) is replaced by the local version`,
    },
  },
  {
    what: 'link into the sshfs layer outside the folder is a plain link',
    local: localFile,
    remote: { type: 'link', target: '/cold/../etc/passwd' },
    base: undefined,
    action: {
      kind: 'push',
      notice: `${REL}: the workspace's link (to /cold/../etc/passwd) is replaced by the local version`,
    },
  },
];

describe('hot sync: what each path needs, from its local, workspace and last synced states', () => {
  for (const row of rows)
    it(row.what, () => {
      const context = { ...CONTEXT, deletionsHeld: row.deletionsHeld ?? false };
      assert.deepEqual(decide(row.local, row.remote, row.base, context), row.action);
    });
});

describe('hot sync never copies what the local git would run', () => {
  const at = (rel: string, local: Entry | undefined, remote: Entry | undefined, base?: Base) =>
    decide(local, remote, base, { ...CONTEXT, rel });
  it('leaves a hook, a config or a gitlink the workspace made, and says so', () => {
    for (const [rel, remote] of [
      ['.git/hooks/pre-commit', remoteFile],
      ['.git/config', remoteEdited],
      ['sub/.git', remoteFile],
      ['.git/modules/x', link],
      ['.GIT/HOOKS', dir],
    ] as const) {
      const action = at(rel, undefined, remote);
      assert.equal(action.kind, 'leave', rel);
      assert.match((action as { problem: string }).problem, /git's own to make on this machine/);
    }
    assert.equal(at('.git/config', localFile, remoteEdited, synced(localFile, remoteFile)).kind, 'leave');
  });
  it('still pushes the local ones, and copies the other files of git and a .git folder', () => {
    assert.equal(at('.git/config', localEdited, remoteFile, synced(localFile, remoteFile)).kind, 'push');
    assert.equal(at('.git/HEAD', undefined, remoteFile).kind, 'pull');
    assert.equal(at('sub/.git', undefined, dir).kind, 'pull');
  });
});
