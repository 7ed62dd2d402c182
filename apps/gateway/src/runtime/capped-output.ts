import { Writable } from 'node:stream';

/** What is kept of each output stream of a command run in a container: far more than any control program prints. */
export const EXEC_OUTPUT_CAP = 1024 * 1024;

export interface CappedOutput {
  /** Takes every write at once (the stream feeding it never stalls); bytes past the cap are dropped. */
  readonly sink: Writable;
  /** What was kept, as text. */
  text(): string;
  /** Whether bytes past the cap were dropped. */
  truncated(): boolean;
}

/**
 * A sink that keeps the first `cap` bytes written to it, so a command that prints without end (`yes`) cannot
 * grow the gateway's memory. `onOverflow` is called once, at the first byte dropped, for the owner to stop reading.
 */
export function cappedOutput(cap: number, onOverflow: () => void): CappedOutput {
  const chunks: Buffer[] = [];
  let kept = 0;
  let dropped = false;
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      const room = cap - kept;
      if (room > 0) {
        const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
        chunks.push(part);
        kept += part.length;
      }
      if (chunk.length > room && !dropped) {
        dropped = true;
        onOverflow();
      }
      done();
    },
  });
  return { sink, text: () => Buffer.concat(chunks).toString('utf8'), truncated: () => dropped };
}
