import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP relay between the CLI and the SSH proxy that the test can cut: while paused, nothing passes either
 * way and new connections hang, as when the network drops packets; on resume everything flows on.
 */
export class PausableRelay {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private readonly waiting: Array<() => void> = [];
  private paused = false;

  constructor(
    private readonly listenHost: string,
    private readonly listenPort: number,
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {
    this.server = createServer((client) => {
      const start = () => {
        const upstream = connect({ host: this.targetHost, port: this.targetPort });
        for (const socket of [client, upstream]) {
          this.sockets.add(socket);
          socket.on('close', () => this.sockets.delete(socket));
          socket.on('error', () => {
            client.destroy();
            upstream.destroy();
          });
        }
        // Not pipe(): its drain handling would resume a side the test paused.
        const forward = (from: Socket, to: Socket) => {
          from.on('data', (chunk) => {
            if (!to.write(chunk)) from.pause();
          });
          to.on('drain', () => {
            if (!this.paused) from.resume();
          });
          from.on('end', () => to.end());
        };
        forward(client, upstream);
        forward(upstream, client);
        if (this.paused) {
          client.pause();
          upstream.pause();
        } else {
          client.resume();
        }
      };
      client.pause();
      if (this.paused) this.waiting.push(start);
      else start();
    });
  }

  listen(): Promise<void> {
    return new Promise((resolve) => this.server.listen(this.listenPort, this.listenHost, resolve));
  }

  pause(): void {
    this.paused = true;
    for (const socket of this.sockets) socket.pause();
  }

  resume(): void {
    this.paused = false;
    for (const socket of this.sockets) socket.resume();
    for (const start of this.waiting.splice(0)) start();
  }

  close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
