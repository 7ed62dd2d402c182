import net from 'node:net';

/** A TCP port free on 127.0.0.1 a moment ago, for a process that must be told its port before it listens. */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Whether something accepts TCP connections on `host:port` now. */
export function acceptsConnections(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, host);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

/**
 * Polls every 10 ms until something listens on `host:port` (true), or `deadline` (epoch ms) passes (false).
 * `check` runs before each try and throws to give up early, as when the process that should listen exited.
 */
export async function waitUntilListening(
  port: number,
  deadline: number,
  options: { host?: string; check?: () => void } = {},
): Promise<boolean> {
  for (;;) {
    options.check?.();
    if (await acceptsConnections(port, options.host)) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
