import type { Actor, ImageStatus, TaskAccepted } from '@ccp/api';
import type { EventBus } from '../../events/event-bus.js';
import { systemActor } from '../../events/event-bus.js';
import type { WorkspaceRuntime } from '../../runtime/workspace-runtime.js';
import type { TaskRunner } from '../tasks/task-runner.js';

/**
 * Whether the managed images are built, and building them; every check is announced on the `image-status` SSE
 * topic.
 */
export class ImagesService {
  private last = '';
  /** Whether the last check found every image built. */
  ready = false;

  constructor(
    private readonly runtime: WorkspaceRuntime,
    private readonly bus: EventBus,
    private readonly tasks: TaskRunner,
  ) {
    tasks.handle('image-build', {
      work: async ({ options }, progress) => {
        await this.runtime.buildImages(options.rebuild === true, progress);
        const images = await this.check();
        return `images ready: ${images.map((image) => image.tag).join(', ')}`;
      },
      onFailure: async () => {
        await this.check();
      },
    });
  }

  /**
   * Queues a build of the images (the missing ones, or all with `rebuild`) as a task on no host; one at a time.
   * Its end is announced like any check, so the dashboard sees the new state.
   */
  async build(actor: Actor, rebuild: boolean): Promise<TaskAccepted> {
    const row = await this.tasks.submit({
      kind: 'image-build',
      hostId: null,
      userId: null,
      actor,
      // The images of this gateway's own engine.
      node: this.tasks.node,
      options: { rebuild },
    });
    return { task_id: row.id, status_url: `/v1/admin/tasks/${row.id}` };
  }

  async check(): Promise<ImageStatus[]> {
    const images = await this.runtime.images();
    this.ready = images.every((image) => image.present);
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
