import type Docker from 'dockerode';
import { expectedImageTag } from '../../apps/gateway/dist/runtime/image-inputs.js';

/** The tags hosts of this variant need; fails naming the build command when one is not built. */
export async function builtImages(
  docker: Docker,
  variant: 'test' | 'full',
): Promise<{ workspace: string; egressGateway: string }> {
  const images = {
    workspace: await expectedImageTag('workspace', variant),
    egressGateway: await expectedImageTag('egress-gateway'),
  };
  for (const tag of Object.values(images)) {
    await docker
      .getImage(tag)
      .inspect()
      .catch(() => {
        throw new Error(`the image ${tag} is not built: run \`image/build.sh --variant ${variant} all\``);
      });
  }
  return images;
}
