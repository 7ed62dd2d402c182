import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nativeCryptoLoaded, nativeCryptoWarning } from '../../src/ssh/ssh2-internals.js';

describe("ssh2's native crypto", () => {
  it('is loaded by the install the project makes (npm ci builds it for the node that runs)', () => {
    assert.equal(nativeCryptoLoaded, true, nativeCryptoWarning() ?? '');
    assert.equal(nativeCryptoWarning(), null);
  });

  it('missing, is said at start-up in one line with what to do', () => {
    const line = nativeCryptoWarning(false);
    assert.ok(line);
    assert.doesNotMatch(line, /\n/);
    assert.match(line, /JavaScript ciphers/);
    assert.match(line, /npm rebuild ssh2/);
  });
});
