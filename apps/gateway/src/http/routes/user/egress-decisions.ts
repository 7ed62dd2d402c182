import { EgressDecisions, EgressDecisionsQuery } from '@ccp/api';
import Type from 'typebox';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { principalOf } from '../../plugins/authentication.js';
import { errorResponses } from '../../schemas.js';
import type { HttpServices } from '../../services.js';

const tags: ApiTag[] = ['user portal'];

export function registerUserEgressDecisionsRoutes(app: Api, { access, egressDecisions }: HttpServices): void {
  app.get(
    '/hosts/:hostID/egress-decisions',
    {
      schema: {
        tags,
        operationId: 'listOwnHostEgressDecisions',
        summary:
          "An own host's destinations its egress policy blocked (enforce) or would have blocked (log-only), with counts " +
          'and last seen, since `from`; read from its egress gateway every EGRESS_POLICY_LOG_SECONDS. ' +
          '`allow_list` is the log turned into allow rules',
        params: Type.Object({ hostID: Type.String({ format: 'uuid' }) }),
        querystring: EgressDecisionsQuery,
        response: { 200: EgressDecisions, ...errorResponses(400, 404) },
      },
    },
    async (request) =>
      egressDecisions.read(
        await access.requireHost(principalOf(request), request.params.hostID, 'view'),
        request.query,
      ),
  );
}
