import type { ImageStatus } from '@ccp/api';
import type { EventBus } from '../events/event-bus.js';
import { systemActor } from '../events/event-bus.js';
import type { WorkspaceRuntime } from '../runtime/workspace-runtime.js';

/** Whether the managed images are built; every check is announced on the `image-status` SSE topic. */
export class ImagesService {
  private last = '';

  constructor(
    private readonly runtime: WorkspaceRuntime,
    private readonly bus: EventBus,
  ) {}

  async check(): Promise<ImageStatus[]> {
    const images = await this.runtime.images();
    this.bus.notify({ type: 'image.checked', images });
    const summary = images.map((i) => `${i.tag}:${i.present}`).join(',');
    if (summary !== this.last) {
      this.last = summary;
      const missing = images.filter((i) => !i.present).map((i) => i.tag);
      await this.bus.emit({
        type: missing.length > 0 ? 'image.missing' : 'image.ready',
        level: missing.length > 0 ? 'warn' : 'info',
        message:
          missing.length > 0
            ? `images not built: ${missing.join(', ')} (run image/build.sh as root)`
            : `images ready: ${images.map((i) => i.tag).join(', ')}`,
        actor: systemActor,
        data: { images: images.map(({ name, tag, present }) => ({ name, tag, present })) },
      });
    }
    return images;
  }
}
