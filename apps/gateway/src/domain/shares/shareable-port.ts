/**
 * The ports of a workspace that may be shared: unprivileged ones, except the workspace's own services (its
 * desktop's websockify and VNC displays), which the gateway reaches on its own terms.
 */
export function shareablePort(port: number): boolean {
  if (!Number.isInteger(port) || port < 1024 || port > 65535) return false;
  return !(port === 6080 || (port >= 5900 && port <= 5999));
}

/** The command that lists the workspace's TCP sockets (run as root in the workspace: it reads /proc only). */
export const LISTENING_PORTS_COMMAND = ['cat', '/proc/net/tcp', '/proc/net/tcp6'];

export const isListeningPortsCommand = (command: string[]): boolean =>
  command.length === LISTENING_PORTS_COMMAND.length &&
  command.every((part, at) => part === LISTENING_PORTS_COMMAND[at]);

/** Lines read from /proc/net/tcp{,6} at most: the workspace writes that table, not us. */
const MAX_LINES = 20_000;
const LISTEN_STATE = '0A';
/** `sl local_address rem_address st …`: the local address is hex IP, a colon, hex port. */
const ROW =
  /^\s*\d+:\s+([0-9A-Fa-f]{8}|[0-9A-Fa-f]{32}):([0-9A-Fa-f]{4})\s+[0-9A-Fa-f:]+\s+([0-9A-Fa-f]{2})\s/;

export interface ListeningPort {
  port: number;
  /** Whether it listens on loopback only (still reachable through a share: the gateway dials it from inside). */
  loopback_only: boolean;
}

/**
 * The shareable ports the workspace listens on, from /proc/net/tcp and tcp6 as printed by the workspace: lines
 * that do not parse are skipped, never trusted, and the list is bounded.
 */
export function parseListeningPorts(text: string): ListeningPort[] {
  const found = new Map<number, boolean>();
  for (const line of text.split('\n').slice(0, MAX_LINES)) {
    const row = ROW.exec(line);
    if (!row || row[3]!.toUpperCase() !== LISTEN_STATE) continue;
    const port = Number.parseInt(row[2]!, 16);
    if (!shareablePort(port)) continue;
    const loopback = isLoopback(row[1]!);
    found.set(port, (found.get(port) ?? true) && loopback);
  }
  return [...found.entries()]
    .sort(([a], [b]) => a - b)
    .slice(0, 1000)
    .map(([port, loopback_only]) => ({ port, loopback_only }));
}

/** 127.0.0.0/8 in /proc's little-endian hex, or ::1 and ::ffff:127.x in the tcp6 table. */
function isLoopback(hex: string): boolean {
  if (hex.length === 8) return hex.slice(6).toUpperCase() === '7F';
  const upper = hex.toUpperCase();
  if (upper === '00000000000000000000000001000000') return true;
  return upper.startsWith('0000000000000000FFFF0000') && upper.slice(30) === '7F';
}
