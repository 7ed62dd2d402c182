import type { RecordedEvent } from '@ccp/api';
import type { Logger } from 'pino';
import type { EventBus } from './event-bus.js';

/** Events written without holding up the caller (a relayed session); `settled` waits for those under way. */
export class BackgroundEvents {
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly bus: EventBus,
    private readonly log: Logger,
  ) {}

  emit(input: RecordedEvent): Promise<void> {
    const written = this.bus
      .emit(input)
      .catch((error: unknown) => this.log.error({ err: error, event: input.type }, 'event not written'))
      .finally(() => this.pending.delete(written));
    this.pending.add(written);
    return written;
  }

  async settled(): Promise<void> {
    await Promise.all(this.pending);
  }
}
