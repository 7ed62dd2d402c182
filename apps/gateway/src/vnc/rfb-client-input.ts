/**
 * Reads a browser's RFB client messages as they are relayed to the desktop (from ClientInit on) and counts the
 * ones a person causes: keys, pointer and clipboard. A viewer left open asks for screen updates on its own, which
 * must not keep its host from its idle stop; a person's input must. Message sizes are RFB's (RFC 6143) and the
 * extensions noVNC sends; a type it does not know ends the reading, and every message from then on counts as
 * input (a used desktop is never taken for an idle one).
 */
export class RfbClientInput {
  /** Input messages seen so far (each one after the reading ended). */
  events = 0;
  /** The start of a message whose size is not known yet (a few bytes at most). */
  private pending: Buffer = Buffer.alloc(0);
  /** Bytes of the current message still to come: passed over, never kept (a clipboard may be large). */
  private skip = 0;
  private clientInitSeen = false;
  private lost = false;

  feed(chunk: Buffer): void {
    if (this.lost) {
      this.events++;
      return;
    }
    let bytes = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    this.pending = Buffer.alloc(0);
    if (!this.clientInitSeen && bytes.length > 0) {
      this.clientInitSeen = true;
      bytes = bytes.subarray(1);
    }
    for (;;) {
      if (this.skip > 0) {
        const passed = Math.min(this.skip, bytes.length);
        this.skip -= passed;
        bytes = bytes.subarray(passed);
        if (this.skip > 0) return;
      }
      const size = messageSize(bytes);
      if (size === 'unknown') {
        this.lost = true;
        this.events++;
        return;
      }
      if (size === null) {
        this.pending = Buffer.from(bytes);
        return;
      }
      if (size.input) this.events++;
      this.skip = size.bytes;
    }
  }
}

const KEY_EVENT = 4;
const POINTER_EVENT = 5;
const CLIENT_CUT_TEXT = 6;
const QEMU = 255;
const QEMU_EXTENDED_KEY_EVENT = 0;

/** The size of the message at the start of `bytes`: null until enough of it is there to tell. */
function messageSize(bytes: Buffer): { bytes: number; input: boolean } | null | 'unknown' {
  if (bytes.length === 0) return null;
  const need = (header: number, size: () => number, input = false) =>
    bytes.length < header ? null : { bytes: size(), input };
  switch (bytes[0]) {
    case 0: // SetPixelFormat
      return { bytes: 20, input: false };
    case 2: // SetEncodings: a count of 4-byte encodings
      return need(4, () => 4 + 4 * bytes.readUInt16BE(2));
    case 3: // FramebufferUpdateRequest
      return { bytes: 10, input: false };
    case KEY_EVENT:
      return { bytes: 8, input: true };
    case POINTER_EVENT:
      return { bytes: 6, input: true };
    case CLIENT_CUT_TEXT: // a length, negative for the extended clipboard's
      return need(8, () => 8 + Math.abs(bytes.readInt32BE(4)), true);
    case 150: // EnableContinuousUpdates
      return { bytes: 10, input: false };
    case 248: // ClientFence: flags, then a payload of up to 64 bytes
      return need(9, () => 9 + bytes[8]!);
    case 250: // xvp
      return { bytes: 4, input: false };
    case 251: // SetDesktopSize: 16 bytes a screen
      return need(8, () => 8 + 16 * bytes[6]!);
    case QEMU:
      if (bytes.length < 2) return null;
      if (bytes[1] === QEMU_EXTENDED_KEY_EVENT) return { bytes: 12, input: true };
      return 'unknown';
    default:
      return 'unknown';
  }
}
