import { ENGINE_REQUEST_TIMEOUT_MS } from './container-engine.js';
import { CommandError } from './netns.js';
import { RuntimeError } from './workspace-runtime.js';

/** The HTTP status of a failed engine call (dockerode puts it on the error), if any. */
export const statusCode = (error: unknown) => (error as { statusCode?: number }).statusCode;

/** For `.catch`: swallows engine errors with these statuses (404 gone already, 304 already so). */
export function ignoreStatus(...codes: number[]) {
  return (error: unknown) => {
    if (!codes.includes(statusCode(error) ?? 0)) throw error;
  };
}

/** Whatever failed under the runtime, as the runtime's own error with a code the API can report. */
export function asRuntimeError(error: unknown): RuntimeError {
  if (error instanceof RuntimeError) return error;
  if (error instanceof CommandError) return new RuntimeError('network_setup_failed', error.message);
  const failure = error as NodeJS.ErrnoException & { statusCode?: number };
  if (failure.syscall === 'connect' || failure.code === 'ECONNREFUSED' || failure.code === 'EACCES') {
    return new RuntimeError(
      'runtime_unavailable',
      `the container engine is not reachable: ${failure.message}`,
    );
  }
  // A request cut off mid-way: the engine closed the connection, or it stayed silent past the gateway's timeout
  // and the gateway dropped it (both read "socket hang up"). An overloaded or restarting dockerd does either.
  if (failure.code === 'ECONNRESET' || failure.code === 'EPIPE') {
    return new RuntimeError(
      'runtime_unavailable',
      `the container engine did not answer within ${ENGINE_REQUEST_TIMEOUT_MS / 1000} s or closed the ` +
        `connection (${failure.message}); try again, and if it keeps failing see \`systemctl status docker\``,
    );
  }
  // The engine answered with a failure of its own, as an overloaded dockerd does when a container does not stop
  // in time: 503 with its words and what to do, not a bare 500 that says nothing.
  if ((failure.statusCode ?? 0) >= 500) {
    return new RuntimeError(
      'runtime_unavailable',
      `the container engine failed: ${failure.message}; try again, and if it keeps failing see ` +
        '`systemctl status docker`',
    );
  }
  const message = failure.statusCode
    ? `container engine: ${failure.message}`
    : String(failure.message ?? error);
  return new RuntimeError('runtime_failed', message);
}

/** Docker's log stream without a TTY: 8-byte frame headers (stream, 0, 0, 0, length) before each chunk. */
export function lastLogLines(buffer: Buffer): string {
  const parts: Buffer[] = [];
  let offset = 0;
  while (offset + 8 <= buffer.length) {
    const length = buffer.readUInt32BE(offset + 4);
    parts.push(buffer.subarray(offset + 8, offset + 8 + length));
    offset += 8 + length;
  }
  return Buffer.concat(parts).toString('utf8').trim().split('\n').slice(-8).join(' | ');
}
