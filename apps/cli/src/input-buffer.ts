/**
 * What is typed while the link is down, kept in order (up to a limit) and delivered once it is back.
 */
export class InputBuffer {
  private chunks: Buffer[] = [];
  private size = 0;
  private dropped = false;

  constructor(private readonly limit = 64 * 1024) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size > this.limit && this.chunks.length > 0) {
      this.size -= this.chunks.shift()?.length ?? 0;
      this.dropped = true;
    }
  }

  /** Puts input back before what is kept (what was sent on a link that died). */
  prepend(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.chunks.unshift(chunk);
    this.size += chunk.length;
  }

  /** Everything kept, oldest first, and whether the oldest part had to be dropped. */
  take(): { data: Buffer; dropped: boolean } {
    const taken = { data: Buffer.concat(this.chunks), dropped: this.dropped };
    this.chunks = [];
    this.size = 0;
    this.dropped = false;
    return taken;
  }
}
