import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { expectedImageTag, IMAGE_ROOT, imageInputsHash } from '../../src/runtime/image-inputs.js';

const buildScript = path.join(IMAGE_ROOT, 'build.sh');

/** `image/build.sh --print-tags` output as a map from image name to tag. */
async function printedTags(variant: string): Promise<Map<string, string>> {
  const { stdout } = await promisify(execFile)('bash', [
    buildScript,
    '--print-tags',
    '--variant',
    variant,
    'all',
  ]);
  const tags = new Map<string, string>();
  for (const line of stdout.trim().split('\n')) {
    const match = /^image ([a-z-]+)=(\S+)$/.exec(line);
    assert.ok(match, `unexpected line from build.sh: ${line}`);
    tags.set(match[1]!, match[2]!);
  }
  return tags;
}

describe('image inputs hash', () => {
  const scratch: string[] = [];
  after(async () => {
    for (const dir of scratch) await rm(dir, { recursive: true, force: true });
  });

  for (const variant of ['test', 'full'] as const) {
    it(`matches the tags build.sh computes (${variant})`, async () => {
      const tags = await printedTags(variant);
      assert.equal(tags.get('workspace'), await expectedImageTag('workspace', variant));
      assert.equal(tags.get('egress-gateway'), await expectedImageTag('egress-gateway', variant));
      assert.match(tags.get('workspace')!, new RegExp(`^ccp-workspace:${variant}-[0-9a-f]{12}$`));
      assert.match(tags.get('egress-gateway')!, /^ccp-egress-gateway:[0-9a-f]{12}$/);
    });
  }

  it('changes with any file of the recipe and with the variant, and only then', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'ccp-image-inputs-'));
    scratch.push(dir);
    await mkdir(path.join(dir, 'rootfs/etc'), { recursive: true });
    await writeFile(path.join(dir, 'Dockerfile'), 'FROM x\n');
    await writeFile(path.join(dir, 'rootfs/etc/.hidden'), 'a\n');
    const first = await imageInputsHash(dir, 'test');
    assert.match(first, /^[0-9a-f]{64}$/);
    assert.equal(await imageInputsHash(dir, 'test'), first);
    assert.notEqual(await imageInputsHash(dir, 'full'), first);

    await writeFile(path.join(dir, 'rootfs/etc/.hidden'), 'b\n');
    const edited = await imageInputsHash(dir, 'test');
    assert.notEqual(edited, first);

    await writeFile(path.join(dir, 'Zz'), '');
    assert.notEqual(await imageInputsHash(dir, 'test'), edited);
  });
});
