import {
  ListeningPortList,
  PortShareCreate,
  PortShareCreated,
  PortShareList,
  PortShareTicket,
  ReceivedPortShareList,
} from '@ccp/api';
import Type from 'typebox';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { principalOf } from '../../plugins/authentication.js';
import { errorResponses } from '../../schemas.js';
import type { HttpServices } from '../../services.js';

type Portal = 'admin' | 'user';

const HostParams = Type.Object({ hostID: Type.String({ format: 'uuid' }) });
const ShareParams = Type.Object({
  hostID: Type.String({ format: 'uuid' }),
  shareID: Type.String({ format: 'uuid' }),
});
const ShareIdParams = Type.Object({ shareID: Type.String({ format: 'uuid' }) });

/**
 * A host's listening ports and shared ports, and tickets into shares; inside the portal's scope (its role check
 * applies). Owners and admins share and revoke; a user a share names finds it in their list and gets tickets
 * into it.
 */
export function registerHostShareRoutes(app: Api, { access, shares }: HttpServices, portal: Portal): void {
  const tags: ApiTag[] = [portal === 'admin' ? 'admin: hosts' : 'user portal'];
  const whose = portal === 'admin' ? 'a host' : 'an own host';
  const operationId = (verb: string, noun: string) => `${verb}${portal === 'admin' ? '' : 'Own'}${noun}`;

  app.get(
    '/hosts/:hostID/ports',
    {
      schema: {
        tags,
        operationId: operationId('list', 'HostListeningPorts'),
        summary: `The TCP ports the workspace of ${whose} listens on that may be shared`,
        params: HostParams,
        response: { 200: ListeningPortList, ...errorResponses(404, 409, 503) },
      },
    },
    async (request) => {
      const grant = await access.requireHost(principalOf(request), request.params.hostID, 'view');
      return { items: await shares.listeningPorts(grant) };
    },
  );

  app.get(
    '/hosts/:hostID/shares',
    {
      schema: {
        tags,
        operationId: operationId('list', 'HostShares'),
        summary: `The shared ports of ${whose}`,
        params: HostParams,
        response: { 200: PortShareList, ...errorResponses(404) },
      },
    },
    async (request) => {
      const grant = await access.requireHost(principalOf(request), request.params.hostID, 'view');
      return { items: await shares.list(grant) };
    },
  );

  app.post(
    '/hosts/:hostID/shares',
    {
      schema: {
        tags,
        operationId: operationId('create', 'HostShare'),
        summary: `Share a port of ${whose} on an origin of its own: private to the owner and admins, named users, or a signed link`,
        params: HostParams,
        body: PortShareCreate,
        response: { 201: PortShareCreated, ...errorResponses(400, 404, 409) },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      const grant = await access.requireHost(principal, request.params.hostID, 'operate');
      return reply.status(201).send(await shares.create(grant, principal, request.body));
    },
  );

  app.delete(
    '/hosts/:hostID/shares/:shareID',
    {
      schema: {
        tags,
        operationId: operationId('revoke', 'HostShare'),
        summary: `Revoke a shared port of ${whose}: its links and open connections end at once`,
        params: ShareParams,
        response: { 204: Type.Null(), ...errorResponses(404) },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      const grant = await access.requireHost(principal, request.params.hostID, 'operate');
      await shares.revoke(grant, principal, request.params.shareID);
      return reply.status(204).send(null);
    },
  );

  // An admin opens every share from its host's page; what others shared by name is a user's list.
  if (portal === 'user')
    app.get(
      '/shares/shared-with-me',
      {
        schema: {
          tags,
          operationId: 'listSharesWithMe',
          summary: "Shared ports of other users' hosts that their owners shared with the caller by username",
          response: { 200: ReceivedPortShareList },
        },
      },
      async (request) => ({ items: await shares.sharedWith(principalOf(request)) }),
    );

  app.post(
    '/shares/:shareID/ticket',
    {
      schema: {
        tags,
        operationId: operationId('create', 'ShareTicket'),
        summary:
          'A one-time entry into a shared port for the caller (owner, admin, or a user it is shared with); no API token in the URL',
        params: ShareIdParams,
        response: { 200: PortShareTicket, ...errorResponses(404) },
      },
    },
    async (request) => shares.ticket(principalOf(request), request.params.shareID),
  );
}
