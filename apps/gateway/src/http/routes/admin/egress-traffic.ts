import { EgressTrafficHours, EgressTrafficQuery, EgressTrafficTotals } from '@ccp/api';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { errorResponses } from '../../schemas.js';
import type { HttpServices } from '../../services.js';

const tags: ApiTag[] = ['admin: egress IPs'];
const admin = { role: 'admin' } as const;

export function registerAdminEgressTrafficRoutes(app: Api, { egressTraffic }: HttpServices): void {
  app.get(
    '/egress-traffic',
    {
      schema: {
        tags,
        operationId: 'getEgressTraffic',
        summary:
          'Bytes sent and received through the upstreams, summed per host, per egress IP and per user over the ' +
          'hours in [from, to) (default: this month so far); counted in the egress gateways, sampled every ' +
          'EGRESS_METER_SECONDS',
        querystring: EgressTrafficQuery,
        response: { 200: EgressTrafficTotals, ...errorResponses(400) },
      },
    },
    (request) => egressTraffic.totals(request.query, admin),
  );

  app.get(
    '/egress-traffic/hours',
    {
      schema: {
        tags,
        operationId: 'listEgressTrafficHours',
        summary: 'The same figures hour by hour, per host and egress IP (one host with host_id)',
        querystring: EgressTrafficQuery,
        response: { 200: EgressTrafficHours, ...errorResponses(400) },
      },
    },
    (request) => egressTraffic.hours(request.query, admin),
  );
}
