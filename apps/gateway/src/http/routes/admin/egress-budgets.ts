import { EgressBudget, EgressBudgetList, EgressBudgetRequest, EgressBudgetScope } from '@ccp/api';
import Type from 'typebox';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { errorResponses, NoContent } from '../../schemas.js';
import type { HttpServices } from '../../services.js';

const tags: ApiTag[] = ['admin: egress IPs'];
const Params = Type.Object({
  scope: EgressBudgetScope,
  subjectID: Type.String({ format: 'uuid', description: 'The host, user or egress IP the budget counts' }),
});

/** Monthly egress budgets of hosts, users and egress IPs. */
export function registerAdminEgressBudgetRoutes(app: Api, { egressBudgets }: HttpServices): void {
  app.get(
    '/egress-budgets',
    {
      schema: {
        tags,
        operationId: 'listEgressBudgets',
        summary:
          "Every egress budget with this month's use, and the gateway's default (EGRESS_BUDGET_HOST_BYTES) for each host without its own",
        response: { 200: EgressBudgetList },
      },
    },
    () => egressBudgets.list(),
  );
  app.get(
    '/egress-budgets/:scope/:subjectID',
    {
      schema: {
        tags,
        operationId: 'getEgressBudget',
        summary: "A host's, user's or egress IP's monthly egress budget with this month's use",
        params: Params,
        response: { 200: EgressBudget, ...errorResponses(404) },
      },
    },
    (request) => egressBudgets.get(request.params.scope, request.params.subjectID),
  );
  app.put(
    '/egress-budgets/:scope/:subjectID',
    {
      schema: {
        tags,
        operationId: 'setEgressBudget',
        summary:
          'Set a monthly egress budget (UTC calendar month): a byte limit, a warning share and notify, throttle or stop at the limit; applied at once (a raised limit lifts a throttle)',
        params: Params,
        body: EgressBudgetRequest,
        response: { 200: EgressBudget, ...errorResponses(400, 404) },
      },
    },
    (request) => egressBudgets.put(request.params.scope, request.params.subjectID, request.body),
  );
  app.delete(
    '/egress-budgets/:scope/:subjectID',
    {
      schema: {
        tags,
        operationId: 'deleteEgressBudget',
        summary: 'Remove a budget (a host falls back to the gateway default); a throttle it caused is lifted',
        params: Params,
        response: { 204: NoContent, ...errorResponses(404) },
      },
    },
    async (request, reply) => {
      await egressBudgets.delete(request.params.scope, request.params.subjectID);
      return reply.status(204).send(null);
    },
  );
}
