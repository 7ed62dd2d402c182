import { once } from 'node:events';
import http from 'node:http';
import http2 from 'node:http2';
import type net from 'node:net';
import type { ListenAddress, ProbeConfig } from './config.js';
import { type DnsServers, startDnsServers } from './dns.js';
import { DnsLog } from './dns-log.js';
import { createHandler } from './http.js';

export interface RunningProbe {
  /** Bound ports (useful when the configuration asked for port 0); undefined when that listener is off. */
  ports: { http: number | undefined; https: number | undefined; dns: number | undefined };
  log: DnsLog;
  close(): Promise<void>;
}

interface Listener {
  port: number;
  close(): Promise<void>;
}

async function listen(server: net.Server, address: ListenAddress): Promise<Listener> {
  const sockets = new Set<net.Socket>();
  server.on('connection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.listen(address.port, address.host);
  await once(server, 'listening');
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        // Keep-alive and HTTP/2 sessions would hold close() open; the probe has nothing worth draining.
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

export async function startProbe(config: ProbeConfig): Promise<RunningProbe> {
  const log = new DnsLog(config.logLimit);
  const zone = { zone: config.zone, answerAddress: config.answerAddress, ttl: config.ttl };
  const handler = createHandler({ zone, log, logToken: config.logToken, maxBytes: config.maxBytes });
  const started: Listener[] = [];
  try {
    let httpPort: number | undefined;
    let httpsPort: number | undefined;
    let dns: DnsServers | undefined;
    if (config.http) {
      const server = http.createServer(handler);
      const listener = await listen(server, config.http);
      started.push(listener);
      httpPort = listener.port;
    }
    if (config.https && config.tls) {
      // HTTP/2 with an HTTP/1.1 fallback: DoH clients prefer h2 (RFC 8484), curl and tests speak 1.1.
      const server = http2.createSecureServer({ ...config.tls, allowHTTP1: true }, handler);
      const listener = await listen(server, config.https);
      started.push(listener);
      httpsPort = listener.port;
    }
    if (config.dns) {
      dns = await startDnsServers(config.dns, zone, log);
      started.push(dns);
    }
    return {
      ports: { http: httpPort, https: httpsPort, dns: dns?.port },
      log,
      close: async () => {
        await Promise.all(started.map((listener) => listener.close()));
      },
    };
  } catch (error) {
    await Promise.all(started.map((listener) => listener.close()));
    throw error;
  }
}
