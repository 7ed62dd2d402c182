import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { buildImages } from '../../src/runtime/image-build.js';
import { RuntimeError } from '../../src/runtime/workspace-runtime.js';

/** A stand-in for image/build.sh that prints what it was asked and steps as the real one does. */
const dir = mkdtempSync(path.join(tmpdir(), 'ccp-image-build-'));
const script = (body: string) => {
  const file = path.join(dir, `build-${Math.random().toString(36).slice(2)}.sh`);
  writeFileSync(file, body);
  return file;
};

describe('building the images with image/build.sh', () => {
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("reports the script's steps as progress and passes the variant and --rebuild", async () => {
    const seen: [number, string][] = [];
    await buildImages(
      'test',
      true,
      async (percent, stage) => {
        seen.push([Math.round(percent), stage]);
      },
      script(`printf '==> [   0s] asked: %s\\n' "$*" >&2
echo 'Step 1/17 : FROM base' >&2
printf '==> [  12s] docker build ccp-workspace:test-0123\\n' >&2
echo 'image workspace=ccp-workspace:test-0123'
`),
    );
    assert.deepEqual(seen, [
      [6, 'asked: --variant test --rebuild all'],
      [13, 'docker build ccp-workspace:test-0123'],
    ]);
  });

  it('fails with the code image_build_failed and the last words of the script', async () => {
    const failure = await buildImages(
      'full',
      false,
      async () => {},
      script(`echo 'error: building images needs root (mmdebstrap and docker)' >&2; exit 1\n`),
    ).then(
      () => assert.fail('built'),
      (error: unknown) => error,
    );
    assert.ok(failure instanceof RuntimeError);
    assert.equal(failure.code, 'image_build_failed');
    assert.equal(
      failure.message,
      'image/build.sh exited with 1: error: building images needs root (mmdebstrap and docker)',
    );
  });
});
