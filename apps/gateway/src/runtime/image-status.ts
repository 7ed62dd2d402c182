import type Docker from 'dockerode';
import { statusCode } from './engine-errors.js';
import type { WorkspaceVariant } from './image-inputs.js';
import { type ImageStatus, RuntimeError } from './workspace-runtime.js';

export interface RuntimeImages {
  workspace: string;
  egressGateway: string;
}

/** Whether each image of the current recipes is built (tags carry the recipe's hash). */
export async function imageStatuses(docker: Docker, images: RuntimeImages): Promise<ImageStatus[]> {
  const out: ImageStatus[] = [];
  for (const [name, tag] of [
    ['workspace', images.workspace],
    ['egress-gateway', images.egressGateway],
  ] as const) {
    try {
      const image = await docker.getImage(tag).inspect();
      out.push({ name, tag, present: true, created_at: image.Created, size_bytes: image.Size });
    } catch (error) {
      if (statusCode(error) !== 404) throw error;
      out.push({ name, tag, present: false, created_at: null, size_bytes: null });
    }
  }
  return out;
}

/** The workspace variant the configured tag names (image/build.sh's tags: `ccp-workspace:<variant>-<hash>`). */
export function workspaceVariant(images: RuntimeImages): WorkspaceVariant {
  return /^ccp-workspace:test-/.test(images.workspace) ? 'test' : 'full';
}

/** Refuses a start without its images, naming the command that builds them. */
export async function requireImages(docker: Docker, images: RuntimeImages): Promise<void> {
  for (const tag of [images.workspace, images.egressGateway]) {
    try {
      await docker.getImage(tag).inspect();
    } catch (error) {
      if (statusCode(error) !== 404) throw error;
      throw new RuntimeError(
        'image_missing',
        `the image ${tag} is not built: run \`image/build.sh --variant ${workspaceVariant(images)} all\` as root`,
      );
    }
  }
}
