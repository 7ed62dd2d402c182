import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { build } from 'esbuild';
// @ts-expect-error: the bundle script is plain JavaScript, run by npm run bundle
import { bundleOptions } from '../scripts/bundle.mjs';

/**
 * What ccp ships inside its one file is declared as its runtime dependencies, so that an audit of what users run
 * (`npm audit --omit=dev`) covers it; as devDependencies it was skipped.
 */
describe("ccp's bundled packages", () => {
  it('are runtime dependencies (what an audit of what users run covers), none dev-only', async () => {
    const result = await build({ ...bundleOptions, write: false, metafile: true, logLevel: 'silent' });
    const shipped = new Set<string>();
    for (const input of Object.keys(result.metafile?.inputs ?? {})) {
      const match = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input);
      if (match && !match[1]!.startsWith('@ccp/')) shipped.add(match[1]!);
    }
    // What `npm audit --omit=dev` looks at: the lockfile's packages not marked dev.
    const lock = JSON.parse(readFileSync(new URL('../../../package-lock.json', import.meta.url), 'utf8'));
    assert.ok(shipped.size > 0, 'the bundle has packages in it');
    assert.deepEqual(
      [...shipped].filter((name) => lock.packages[`node_modules/${name}`]?.dev !== undefined),
      [],
      `shipped: ${[...shipped].join(', ')}`,
    );
  });
});
