import { VncStatus, VncTicket } from '@ccp/api';
import websocket from '@fastify/websocket';
import type { FastifyRequest } from 'fastify';
import Type from 'typebox';
import { errors } from '../../../domain/errors.js';
import { vncPagePath } from '../../../vnc/vnc-access.js';
import type { DesktopAccess } from '../../../vnc/vnc-proxy.js';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { principalOf } from '../../plugins/authentication.js';
import { errorResponses } from '../../schemas.js';
import type { HttpServices } from '../../services.js';
import { registerTerminalSocketRoutes } from './host-terminal.js';

type Portal = 'admin' | 'user';

const HostParams = Type.Object({ hostID: Type.String({ format: 'uuid' }) });
const ProxyParams = Type.Object({ hostID: Type.String({ format: 'uuid' }), '*': Type.String() });

/** Status, start, restart and tickets of a host's desktop; inside the portal's scope (its role check applies). */
export function registerHostDesktopRoutes(
  app: Api,
  { access, desktop, vnc }: HttpServices,
  portal: Portal,
): void {
  const tags: ApiTag[] = [portal === 'admin' ? 'admin: hosts' : 'user portal'];
  const whose = portal === 'admin' ? 'a host' : 'an own host';
  // getHostDesktopStatus for the admin, getOwnHostDesktopStatus for the owner.
  const operationId = (verb: string, noun: string) => `${verb}${portal === 'admin' ? '' : 'Own'}${noun}`;
  const schema = (id: string, summary: string, statuses: number[]) => ({
    tags,
    operationId: id,
    summary,
    params: HostParams,
    response: { 200: VncStatus, ...errorResponses(...statuses) },
  });

  app.get(
    '/hosts/:hostID/vnc/status',
    { schema: schema(operationId('get', 'HostDesktopStatus'), `Desktop status of ${whose}`, [404, 503]) },
    async (request) => {
      return desktop.status(await access.requireHost(principalOf(request), request.params.hostID, 'desktop'));
    },
  );

  for (const action of ['start', 'restart'] as const) {
    app.post(
      `/hosts/:hostID/vnc/${action}`,
      {
        schema: schema(
          operationId(action, 'HostDesktop'),
          `${action === 'start' ? 'Start' : 'Restart'} the desktop of ${whose} (no rebuild); answers once it is up`,
          [404, 409, 503],
        ),
      },
      async (request) => {
        const grant = await access.requireHost(principalOf(request), request.params.hostID, 'desktop');
        return desktop.control(grant, action);
      },
    );
  }

  app.post(
    '/hosts/:hostID/vnc/ticket',
    {
      schema: {
        tags,
        operationId: operationId('create', 'HostDesktopTicket'),
        summary: `A one-time link that opens the desktop of ${whose} in a browser (no API token in the URL)`,
        params: HostParams,
        response: { 200: VncTicket, ...errorResponses(404, 409) },
      },
    },
    async (request) => vnc.ticket(principalOf(request), request.params.hostID),
  );
}

declare module 'fastify' {
  interface FastifyRequest {
    desktopAccess: DesktopAccess | null;
  }
}

/**
 * The desktop's reverse proxy below `/v1/{admin,user}/hosts/{hostID}/vnc/`: GET and HEAD of the web client's
 * files and the WebSocket of its stream. Outside the portals' scopes, because a browser's requests carry a
 * ticket (the first) or the desktop pass in their path, not a header; every request is authenticated here.
 */
export async function registerDesktopProxyRoutes(app: Api, services: HttpServices): Promise<void> {
  const { vnc } = services;
  await app.register(async (scope) => {
    const api = scope as unknown as Api;
    await api.register(websocket, { options: { maxPayload: 16 * 1024 * 1024, perMessageDeflate: false } });
    api.decorateRequest('desktopAccess', null);
    const accessOf = (request: FastifyRequest): DesktopAccess => {
      if (!request.desktopAccess) throw errors.unauthorized();
      return request.desktopAccess;
    };

    for (const portal of ['admin', 'user'] as const) {
      api.route({
        method: 'GET',
        url: `/v1/${portal}/hosts/:hostID/vnc/*`,
        schema: { hide: true, params: ProxyParams },
        preHandler: async (request) => {
          const { hostID } = request.params as { hostID: string };
          const query = new URL(request.url, 'http://gateway').searchParams;
          const rest = (request.params as { '*': string })['*'];
          request.desktopAccess = await vnc.authorize(
            portal,
            hostID,
            request.headers,
            query,
            rest,
            request.ws,
          );
        },
        handler: async (request, reply) => {
          const access = accessOf(request);
          reply.header('referrer-policy', 'no-referrer').header('x-content-type-options', 'nosniff');
          if (access.source === 'ticket') {
            // The page's own requests cannot carry a header: the used ticket leaves the address bar for a path
            // holding a pass for this host's desktop (never a cookie: cookies ignore ports, see vnc-access.ts).
            return reply.header('cache-control', 'no-store').redirect(vnc.passPageFor(access), 303);
          }
          if (access.rest === '') return reply.redirect(vncPagePath(access.basePath), 303);
          const file = await vnc.fetchFile(access, access.rest);
          return reply.status(file.status).headers(file.headers).send(file.body);
        },
        wsHandler: (socket, request) => {
          vnc.openSession(socket, accessOf(request), request.ip);
        },
      });
    }
    // The browser terminal's WebSocket shares this scope: two WebSocket plugins would both take every upgrade.
    registerTerminalSocketRoutes(api, services);
  });
}
