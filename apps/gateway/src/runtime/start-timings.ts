import { performance } from 'node:perf_hooks';

/** One timed part of a start: when it began (ms after the start began) and how long it took. */
export interface TimingSpan {
  name: string;
  atMs: number;
  ms: number;
}

/** Where the runtime says at debug level how its starts went (the gateway's pino logger fits). */
export interface RuntimeLog {
  debug(fields: object, message: string): void;
}

/**
 * The named spans of one start, for the debug log and the start bench. Parts of a start run side by side, so
 * spans overlap: the sum of the spans is not the start's time, `atMs` and `ms` together show the critical path.
 */
export class StartTimings {
  private readonly began = performance.now();
  readonly spans: TimingSpan[] = [];

  /** Times `work` as `name`, whether it succeeds or fails. */
  async span<T>(name: string, work: () => Promise<T>): Promise<T> {
    const start = performance.now();
    try {
      return await work();
    } finally {
      this.spans.push({ name, atMs: rounded(start - this.began), ms: rounded(performance.now() - start) });
    }
  }

  elapsedMs(): number {
    return rounded(performance.now() - this.began);
  }
}

const rounded = (ms: number) => Math.round(ms * 10) / 10;
