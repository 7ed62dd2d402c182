import { EgressTrafficHours, EgressTrafficQuery, EgressTrafficTotals } from '@ccp/api';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { principalOf } from '../../plugins/authentication.js';
import { errorResponses } from '../../schemas.js';
import type { HttpServices } from '../../services.js';

const tags: ApiTag[] = ['user portal'];

export function registerUserEgressTrafficRoutes(app: Api, { egressTraffic }: HttpServices): void {
  app.get(
    '/egress-traffic',
    {
      schema: {
        tags,
        operationId: 'getOwnEgressTraffic',
        summary:
          'Bytes own hosts sent and received through their upstreams over [from, to) (default: this month)',
        querystring: EgressTrafficQuery,
        response: { 200: EgressTrafficTotals, ...errorResponses(400) },
      },
    },
    (request) => egressTraffic.totals(request.query, { role: 'user', userId: principalOf(request).id }),
  );

  app.get(
    '/egress-traffic/hours',
    {
      schema: {
        tags,
        operationId: 'listOwnEgressTrafficHours',
        summary: 'The same figures of own hosts hour by hour',
        querystring: EgressTrafficQuery,
        response: { 200: EgressTrafficHours, ...errorResponses(400) },
      },
    },
    (request) => egressTraffic.hours(request.query, { role: 'user', userId: principalOf(request).id }),
  );
}
