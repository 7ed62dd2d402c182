import { closeSync, openSync } from 'node:fs';
import { ReadStream } from 'node:tty';

/** Colours only when the stream is a terminal and NO_COLOR is unset. */
export function paint(stream: NodeJS.WriteStream, code: number, text: string): string {
  if (!stream.isTTY || process.env.NO_COLOR) return text;
  return `\u001b[${code}m${text}\u001b[0m`;
}

export const red = (text: string) => paint(process.stderr, 31, text);
export const yellow = (text: string) => paint(process.stderr, 33, text);
export const dim = (text: string) => paint(process.stderr, 2, text);

/**
 * One line on stderr that is rewritten in place on a terminal; elsewhere each new text is its own line, so
 * logs stay readable.
 */
export class StatusLine {
  private last = '';
  private shown = false;

  update(text: string): void {
    if (text === this.last) return;
    this.last = text;
    if (process.stderr.isTTY) {
      process.stderr.write(`\r\u001b[2K${dim(text)}`);
      this.shown = true;
    } else {
      process.stderr.write(`${text}\n`);
    }
  }

  clear(): void {
    if (this.shown) process.stderr.write('\r\u001b[2K');
    this.shown = false;
    this.last = '';
  }
}

/**
 * Undoes what a tmux client leaves when it cannot end itself: leaves the alternate screen, resets the scroll
 * region (cursor kept: resetting it moves the cursor home), shows the cursor, resets colours, turns off
 * mouse reporting and bracketed paste.
 */
export const RESTORE_TERMINAL =
  '\u001b[?1049l\u001b7\u001b[r\u001b8\u001b[?25h\u001b[0m\u001b[?1000l\u001b[?1002l\u001b[?1006l\u001b[?2004l\r\n';

export function restoreTerminal(stream: NodeJS.WriteStream = process.stdout): void {
  if (stream.isTTY) stream.write(RESTORE_TERMINAL);
}

/** Reads a secret from the controlling terminal with echo off; null when there is no terminal. */
export async function readSecret(prompt: string): Promise<string | null> {
  let fd: number;
  try {
    fd = openSync('/dev/tty', 'r+');
  } catch {
    return null;
  }
  const input = new ReadStream(fd);
  process.stderr.write(prompt);
  input.setRawMode(true);
  try {
    return await new Promise<string>((resolve, reject) => {
      let value = '';
      input.on('data', (chunk: Buffer) => {
        for (const char of chunk.toString('utf8')) {
          if (char === '\r' || char === '\n') return resolve(value);
          if (char === '\u0003') return reject(new Error('interrupted'));
          if (char === '\u007f' || char === '\b') value = value.slice(0, -1);
          else value += char;
        }
      });
    });
  } finally {
    input.setRawMode(false);
    input.destroy();
    try {
      closeSync(fd);
    } catch {}
    process.stderr.write('\n');
  }
}
