import { DashboardStats, EventList, EventQuery, NodeList } from '@ccp/api';
import type { Api } from '../api.js';
import { errorResponses } from '../schemas.js';
import type { HttpServices } from '../services.js';

export function registerAdminActivityRoutes(app: Api, { events, status }: HttpServices): void {
  app.get(
    '/events',
    {
      schema: {
        tags: ['admin: events'],
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
        tags: ['admin: events'],
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
        tags: ['admin: events'],
        summary: 'The gateways sharing the database: their state, capacity and hosts',
        response: { 200: NodeList },
      },
    },
    async () => ({ nodes: await status.nodes() }),
  );
}
