import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The image recipes (`image/<name>/`) of this checkout; the same relative path from src/ and dist/. */
export const IMAGE_ROOT = fileURLToPath(new URL('../../../../image/', import.meta.url));

export type ImageName = 'workspace' | 'egress-gateway';
export type WorkspaceVariant = 'test' | 'full';

/** Labels image/build.sh puts on every image it builds. */
export const IMAGE_LABELS = {
  image: 'cloud-cli-proxy.image',
  inputsHash: 'cloud-cli-proxy.inputs-hash',
  variant: 'cloud-cli-proxy.variant',
} as const;

async function listFiles(dir: string, prefix: string, out: string[]): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const rel = `${prefix}/${entry.name}`;
    if (entry.isDirectory()) await listFiles(join(dir, entry.name), rel, out);
    // Like `find -type f`: symbolic links and special files are not inputs.
    else if (entry.isFile()) out.push(rel);
  }
}

/**
 * The inputs hash of an image recipe, exactly as image/build.sh computes it: sha256 over a header, the variant
 * and one `<sha256 of the file>  ./<path>` line per regular file, sorted bytewise by path.
 */
export async function imageInputsHash(recipeDir: string, variant: string): Promise<string> {
  const files: string[] = [];
  await listFiles(recipeDir, '.', files);
  files.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  const manifest = createHash('sha256');
  manifest.update(`cloud-cli-proxy image inputs v2\nvariant ${variant}\n`);
  for (const rel of files) {
    // sha256sum escapes these in its output, and the shell side does not expect that.
    if (/[\\\n]/.test(rel)) throw new Error(`unsupported file name in image recipe: ${JSON.stringify(rel)}`);
    const digest = createHash('sha256')
      .update(await readFile(join(recipeDir, rel)))
      .digest('hex');
    manifest.update(`${digest}  ${rel}\n`);
  }
  return manifest.digest('hex');
}

/** The variant label of an image: the workspace has `test` and `full`, the egress gateway only `default`. */
export function imageVariant(name: ImageName, variant: WorkspaceVariant): string {
  return name === 'workspace' ? variant : 'default';
}

/** The tag image/build.sh gives the image built from the current recipe, e.g. `ccp-workspace:full-0123456789ab`. */
export async function expectedImageTag(
  name: ImageName,
  variant: WorkspaceVariant = 'full',
  imageRoot: string = IMAGE_ROOT,
): Promise<string> {
  const hash = await imageInputsHash(join(imageRoot, name), imageVariant(name, variant));
  const short = hash.slice(0, 12);
  return name === 'workspace' ? `ccp-workspace:${variant}-${short}` : `ccp-${name}:${short}`;
}
