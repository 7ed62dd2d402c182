import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));
const MINTER = path.join('domain', 'access', 'access.ts');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sources(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

/** The names a file imports from grants.ts, types aside. */
function importsFromGrants(text: string): string[] {
  const found: string[] = [];
  for (const match of text.matchAll(/import\s*(type\s*)?\{([^}]*)\}\s*from\s*'[^']*grants\.js'/g)) {
    if (match[1]) continue;
    for (const name of match[2]!.split(',')) {
      const trimmed = name.trim();
      if (trimmed && !trimmed.startsWith('type ')) found.push(trimmed.split(/\s+as\s+/)[0]!);
    }
  }
  return found;
}

describe('grants are made in one place', () => {
  it('only domain/access/access.ts imports mint', () => {
    const minters = sources(SRC)
      .filter((file) => importsFromGrants(readFileSync(file, 'utf8')).includes('mint'))
      .map((file) => path.relative(SRC, file));
    assert.deepEqual(minters, [MINTER]);
  });

  it('the check sees a second minter', () => {
    assert.deepEqual(importsFromGrants("import { hostOf, mint as make } from '../domain/grants.js';"), [
      'hostOf',
      'mint',
    ]);
    assert.deepEqual(importsFromGrants("import type { HostGrant } from './grants.js';"), []);
  });
});
