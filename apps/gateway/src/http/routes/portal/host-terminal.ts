import { TerminalSessionList, TerminalTicket, TerminalTicketRequest } from '@ccp/api';
import type { FastifyRequest } from 'fastify';
import Type from 'typebox';
import { errors } from '../../../domain/errors.js';
import type { TerminalAccess } from '../../../ssh/web-terminal.js';
import { originAllowed } from '../../../vnc/vnc-access.js';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { principalOf } from '../../plugins/authentication.js';
import { errorResponses } from '../../schemas.js';
import type { HttpServices } from '../../services.js';

type Portal = 'admin' | 'user';

const HostParams = Type.Object({ hostID: Type.String({ format: 'uuid' }) });

/** The browser terminal's tmux sessions and its tickets; inside the portal's scope (its role check applies). */
export function registerHostTerminalRoutes(
  app: Api,
  { access, terminals }: HttpServices,
  portal: Portal,
): void {
  const tags: ApiTag[] = [portal === 'admin' ? 'admin: hosts' : 'user portal'];
  const whose = portal === 'admin' ? 'a host' : 'an own host';
  const operationId = (verb: string, noun: string) => `${verb}${portal === 'admin' ? '' : 'Own'}${noun}`;

  app.get(
    '/hosts/:hostID/terminal/sessions',
    {
      schema: {
        tags,
        operationId: operationId('list', 'HostTerminalSessions'),
        summary: `The tmux sessions in the workspace of ${whose} (as \`ccp sessions\` lists them)`,
        params: HostParams,
        response: { 200: TerminalSessionList, ...errorResponses(404, 409, 503) },
      },
    },
    async (request) => {
      const grant = await access.requireHost(principalOf(request), request.params.hostID, 'terminal');
      return { items: await terminals.sessions(grant) };
    },
  );

  app.post(
    '/hosts/:hostID/terminal/ticket',
    {
      schema: {
        tags,
        operationId: operationId('create', 'HostTerminalTicket'),
        summary: `A one-time WebSocket address for a browser terminal on ${whose}, attached to a tmux session (no API token in the URL)`,
        params: HostParams,
        body: TerminalTicketRequest,
        response: { 200: TerminalTicket, ...errorResponses(400, 404, 409) },
      },
    },
    async (request) => terminals.ticket(principalOf(request), request.params.hostID, request.body),
  );
}

declare module 'fastify' {
  interface FastifyRequest {
    terminalAccess: TerminalAccess | null;
  }
}

/**
 * The terminal's WebSocket, `/v1/{admin,user}/hosts/{hostID}/terminal/ws?ticket=`. Outside the portals' scopes,
 * because a browser cannot put a header on a WebSocket: the one-time ticket is its credential, taken here. Called
 * inside the desktop proxy's scope, which holds the one WebSocket plugin of the app.
 */
export function registerTerminalSocketRoutes(api: Api, { terminals, config }: HttpServices): void {
  api.decorateRequest('terminalAccess', null);
  const accessOf = (request: FastifyRequest): TerminalAccess => {
    if (!request.terminalAccess) throw errors.unauthorized();
    return request.terminalAccess;
  };
  for (const portal of ['admin', 'user'] as const) {
    api.route({
      method: 'GET',
      url: `/v1/${portal}/hosts/:hostID/terminal/ws`,
      schema: {
        tags: [portal === 'admin' ? 'admin: hosts' : 'user portal'],
        operationId: portal === 'admin' ? 'openHostTerminal' : 'openOwnHostTerminal',
        summary:
          'The browser terminal: a WebSocket to a tmux session in the workspace, opened with a one-time ticket',
        description:
          'Upgrade to a WebSocket at the address a terminal ticket names (POST …/terminal/ticket); the ticket is ' +
          'the credential (a browser cannot send a header here) and is used up by the attempt. Binary frames ' +
          'carry the terminal both ways; text frames from the client are JSON controls: ' +
          '`{"type":"resize","cols":80,"rows":24}` and `{"type":"scroll","lines":-5}` (tmux\'s history). The ' +
          'close frame says why it ended: 1000 `session_ended` (the tmux client left: detached, taken over, the ' +
          'last shell ended), 1001 `host_stopped` or `gateway_stopped`, 1008 `user_disabled`, `user_expired`, ' +
          '`user_deleted`, `user_credentials_changed`, `user_revoked` or `too_many_terminals`, 1011 when the ' +
          'workspace could not be reached. A plain GET answers 400.',
        params: HostParams,
        querystring: Type.Object({
          ticket: Type.Optional(Type.String({ description: 'The one-time terminal ticket' })),
        }),
        security: [],
        response: errorResponses(400, 401, 403, 404, 409),
      },
      preHandler: async (request) => {
        if (!request.ws)
          throw errors.badRequest(
            'websocket_required',
            'This address takes a WebSocket only (with a terminal ticket)',
          );
        // A ticket is no ambient credential, but a page of another site has no business here either.
        if (!originAllowed(request.headers, config.publicApiUrl))
          throw errors.forbidden('The WebSocket origin is not allowed');
        const { hostID } = request.params as { hostID: string };
        const query = new URL(request.url, 'http://gateway').searchParams;
        request.terminalAccess = await terminals.authorize(portal, hostID, query);
      },
      handler: async () => {
        throw errors.badRequest(
          'websocket_required',
          'This address takes a WebSocket only (with a terminal ticket)',
        );
      },
      wsHandler: (socket, request) => {
        terminals.open(socket, accessOf(request), request.ip);
      },
    });
  }
}
