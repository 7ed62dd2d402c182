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

/** The extra listener on DASHBOARD_PORT: the same handlers (the page and the API it calls) on a second port. */
export async function listenDashboardPort(app: Api, host: string, port: number): Promise<Server> {
  const server = createServer((request, response) => app.routing(request, response));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}
