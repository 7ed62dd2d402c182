import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isGitControlFile, isGitDirEntry, isInsideGitDir } from '../src/git-control-files.js';

describe('git control files', () => {
  it('are the config, commondir and hooks of any git dir, as case-insensitive file systems see names', () => {
    for (const controlled of [
      '.git/config',
      '.git/config.worktree',
      '.git/commondir',
      '.git/hooks',
      '.git/hooks/pre-commit',
      'sub/.git/config',
      '.git/modules/lib/config',
      '.git/modules/lib/hooks/post-checkout',
      '.git/worktrees/w/commondir',
      '.GIT/Config',
      '.git./hooks/x',
      '.g\u200cit/config',
    ])
      assert.equal(isGitControlFile(controlled), true, controlled);
    for (const free of [
      'config',
      'hooks/pre-commit',
      'src/.gitignore',
      '.git/HEAD',
      '.git/objects/aa/bb',
      '.git/refs/heads/main',
      '.git/description',
      '.github/workflows/ci.yml',
      '.gitmodules',
    ])
      assert.equal(isGitControlFile(free), false, free);
  });

  it('tell a .git entry itself, and what lies inside one', () => {
    assert.equal(isGitDirEntry('sub/.git'), true);
    assert.equal(isGitDirEntry('sub/.GIT '), true);
    assert.equal(isGitDirEntry('sub/.gitignore'), false);
    assert.equal(isInsideGitDir('.git/modules/x'), true);
    assert.equal(isInsideGitDir('sub/.git'), false);
    assert.equal(isInsideGitDir('src/main.ts'), false);
  });
});
