import type Docker from 'dockerode';
import { statusCode } from './engine-errors.js';
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

/** Refuses a start without its images, naming the command that builds them. */
export async function requireImages(docker: Docker, images: RuntimeImages): Promise<void> {
  for (const tag of [images.workspace, images.egressGateway]) {
    try {
      await docker.getImage(tag).inspect();
    } catch (error) {
      if (statusCode(error) !== 404) throw error;
      const variant = /^ccp-workspace:(test|full)-/.exec(images.workspace)?.[1] ?? 'full';
      throw new RuntimeError(
        'image_missing',
        `the image ${tag} is not built: run \`image/build.sh --variant ${variant} all\` as root`,
      );
    }
  }
}
