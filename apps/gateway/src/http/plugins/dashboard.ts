import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { Api } from '../api.js';

/** Where `npm run build` puts the dashboard (apps/dashboard/dist), the same from src/ and dist/. */
export const DASHBOARD_DIR = fileURLToPath(new URL('../../../../dashboard/dist/', import.meta.url));

/** Paths that belong to the gateway itself: the dashboard's page fallback never answers them. */
const GATEWAY_PATHS = /^\/(?:v1|healthz|entry|metrics)(?:[/?]|$)/;

/**
 * Serves the built dashboard at `/`: its files, and its page for any other GET path that is not the gateway's
 * own, so deep links such as /admin/hosts/<id> load the app. Without a build nothing is served.
 */
export async function registerDashboard(app: Api, dir: string = DASHBOARD_DIR): Promise<boolean> {
  if (!existsSync(path.join(dir, 'index.html'))) return false;
  await app.register(fastifyStatic, {
    root: dir,
    wildcard: false,
    setHeaders(reply, file) {
      // Vite puts a content hash in every asset name; the page itself must be re-read to find new ones.
      const immutable = file.startsWith(path.join(dir, 'assets') + path.sep);
      reply.header('cache-control', immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
    },
  });
  app.get('/*', { schema: { hide: true } }, (request, reply) => {
    // A missing asset is a 404, not the page: a stale tab asking for an old bundle must not get HTML.
    if (GATEWAY_PATHS.test(request.url) || request.url.startsWith('/assets/')) return reply.callNotFound();
    return reply.header('cache-control', 'no-cache').sendFile('index.html');
  });
  return true;
}

/**
 * The extra listener on DASHBOARD_PORT: the same app (the page, the API it calls and the desktop's WebSockets)
 * on a second port. Requests go to the app's router, and upgrades to the app's own server's `upgrade` handlers
 * (those of @fastify/websocket), so both ports share one router, one set of hooks and one WebSocket server,
 * whose streams the app closes on shutdown. Building the app a second time would double every hook's state
 * (rate limits, SSE clients, metrics) and its shutdown.
 */
export async function listenDashboardPort(app: Api, host: string, port: number): Promise<Server> {
  const server = createServer((request, response) => app.routing(request, response));
  server.on('upgrade', (request, socket, head) => {
    // Without a WebSocket route there is nobody to answer: end the socket as Node does with no handler.
    if (app.server.listenerCount('upgrade') === 0) socket.destroy();
    else app.server.emit('upgrade', request, socket, head);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}
