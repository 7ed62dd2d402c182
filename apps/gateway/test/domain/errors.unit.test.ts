import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { storeFailure } from '../../src/domain/errors.js';

describe('storeFailure', () => {
  it('names a full disk and an unreachable database, from either driver, and nothing else', () => {
    for (const code of ['SQLITE_FULL', '53100', 'ENOSPC']) {
      const failure = storeFailure(Object.assign(new Error('no room'), { code }));
      assert.deepEqual([failure?.kind, failure?.code], ['insufficient_storage', 'storage_full'], code);
    }
    for (const error of [
      Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }),
      Object.assign(new Error('shutting down'), { code: '57P01' }),
      new Error('Connection terminated unexpectedly'),
    ]) {
      const failure = storeFailure(error);
      assert.deepEqual(
        [failure?.kind, failure?.code],
        ['unavailable', 'database_unavailable'],
        error.message,
      );
    }
    assert.equal(storeFailure(Object.assign(new Error('dup'), { code: 'SQLITE_CONSTRAINT_UNIQUE' })), null);
    assert.equal(storeFailure(new Error('a bug')), null);
    assert.equal(storeFailure('not even an error'), null);
  });
});
