import { DashboardStats, EventList, EventQuery, NodeList, NodeName } from '@ccp/api';
import Type from 'typebox';
import { actorOf } from '../../../domain/access/principal.js';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { principalOf } from '../../plugins/authentication.js';
import { errorResponses, NoContent } from '../../schemas.js';
import type { HttpServices } from '../../services.js';

export function registerAdminActivityRoutes(app: Api, { events, status, nodeRemoval }: HttpServices): void {
  app.get(
    '/events',
    {
      schema: {
        tags: ['admin: events'] satisfies ApiTag[],
        operationId: 'listEvents',
        summary: 'The event log, newest first; filters combine',
        querystring: EventQuery,
        response: { 200: EventList, ...errorResponses(400) },
      },
    },
    (request) => events.query(request.query),
  );

  app.get(
    '/dashboard/stats',
    {
      schema: {
        tags: ['admin: events'] satisfies ApiTag[],
        operationId: 'getDashboardStats',
        summary: 'Counts for the dashboard',
        response: { 200: DashboardStats },
      },
    },
    () => status.dashboard(),
  );

  app.get(
    '/nodes',
    {
      schema: {
        tags: ['admin: nodes'] satisfies ApiTag[],
        operationId: 'listNodes',
        summary: 'The gateways sharing the database: their state, capacity and hosts',
        response: { 200: NodeList },
      },
    },
    async () => ({ nodes: await status.nodes() }),
  );

  app.delete(
    '/nodes/:name',
    {
      schema: {
        tags: ['admin: nodes'] satisfies ApiTag[],
        operationId: 'removeNode',
        summary:
          'Remove a node that is gone for good: its hosts move to live nodes, stopped (their next start makes a new workspace there), its unfinished tasks fail; 409 node_live while it heartbeats',
        params: Type.Object({ name: NodeName }),
        response: { 204: NoContent, ...errorResponses(404, 409) },
      },
    },
    async (request, reply) => {
      await nodeRemoval.remove(request.params.name, actorOf(principalOf(request)));
      return reply.status(204).send(null);
    },
  );
}
