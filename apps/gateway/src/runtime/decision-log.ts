import { closeSync, constants, fstatSync, ftruncateSync, openSync, readSync } from 'node:fs';

/** The egress gateway's tmpfs the policy's decision log lives on (the engine's `decisionLogPath` is in it). */
export const DECISION_LOG_DIR = '/tmp';
/**
 * Where the egress gateway's DNS filter logs the names it refused (image/egress-gateway), in the form of the
 * tunnel's lines for a blocked connection (port 53), so they are read and counted with them.
 */
export const DNS_REFUSAL_LOG_PATH = `${DECISION_LOG_DIR}/ccp-dns-refusals.log`;
/** Its size: past it the tunnel's log lines are lost until the next reading empties it. */
export const DECISION_LOG_BYTES = 8 * 1024 * 1024;
/** A log within this of the size has (nearly) filled it. */
const FULL_MARGIN = 64 * 1024;

/**
 * Reads the decision log at `pathInGateway` in the egress gateway whose process is `gatewayPid` (through its
 * root, as this machine's root), and empties it; null when there is none yet. The tunnel appends (O_APPEND),
 * so lines it writes after the emptying start the file again; only a line written between the last read and
 * the truncation, microseconds apart, is lost. The tunnel's user owns the file: it is opened without following
 * a link and must be a plain file, so a tunnel that was taken over cannot point this at another file.
 */
export function takeDecisionLog(
  gatewayPid: number,
  pathInGateway: string,
): { text: string; overflowed: boolean } | null {
  if (!pathInGateway.startsWith(`${DECISION_LOG_DIR}/`) || pathInGateway.includes('..'))
    throw new TypeError(`the decision log must be a file in ${DECISION_LOG_DIR}: ${pathInGateway}`);
  let fd: number;
  try {
    fd = openSync(
      `/proc/${gatewayPid}/root${pathInGateway}`,
      constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NONBLOCK,
    );
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  try {
    if (!fstatSync(fd).isFile()) return null;
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const chunk = Buffer.allocUnsafe(256 * 1024);
      const read = readSync(fd, chunk, 0, chunk.length, total);
      if (read === 0) break;
      chunks.push(chunk.subarray(0, read));
      total += read;
      if (total > DECISION_LOG_BYTES) break;
    }
    ftruncateSync(fd, 0);
    return {
      text: Buffer.concat(chunks).toString('utf8'),
      overflowed: total >= DECISION_LOG_BYTES - FULL_MARGIN,
    };
  } finally {
    closeSync(fd);
  }
}
