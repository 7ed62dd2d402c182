import {
  CreateEgressIpRequest,
  EgressIp,
  EgressIpList,
  EgressTestFailedError,
  EgressTestResult,
  UpdateEgressIpRequest,
} from '@ccp/api';
import Type from 'typebox';
import { actorOf } from '../../../domain/access/principal.js';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { principalOf } from '../../plugins/authentication.js';
import { errorResponses, NoContent } from '../../schemas.js';
import type { HttpServices } from '../../services.js';

const tags: ApiTag[] = ['admin: egress IPs'];
const Params = Type.Object({ ipID: Type.String({ format: 'uuid' }) });

export function registerAdminEgressRoutes(app: Api, { egressIps }: HttpServices): void {
  app.post(
    '/egress-ips',
    {
      schema: {
        tags,
        operationId: 'createEgressIp',
        summary: 'Register an egress IP (an upstream proxy); proxy_config is validated per type',
        body: CreateEgressIpRequest,
        response: { 201: EgressIp, ...errorResponses(400) },
      },
    },
    async (request, reply) =>
      reply.status(201).send(await egressIps.create(request.body, actorOf(principalOf(request)))),
  );

  app.get(
    '/egress-ips',
    {
      schema: {
        tags,
        operationId: 'listEgressIps',
        summary: 'List egress IPs (secrets masked)',
        response: { 200: EgressIpList },
      },
    },
    async () => ({ egress_ips: await egressIps.list() }),
  );

  app.get(
    '/egress-ips/:ipID',
    {
      schema: {
        tags,
        operationId: 'getEgressIp',
        summary: 'Get an egress IP',
        params: Params,
        response: { 200: EgressIp, ...errorResponses(404) },
      },
    },
    (request) => egressIps.get(request.params.ipID),
  );

  app.put(
    '/egress-ips/:ipID',
    {
      schema: {
        tags,
        operationId: 'updateEgressIp',
        summary:
          'Update an egress IP: each given field replaces the stored one; a secret sent as "********" is kept ' +
          'while type, server and server_port stay as stored (with any of them changed, send the secret again). ' +
          'Running hosts bound to it switch to the new upstream without a restart; while there are any, a new ' +
          'upstream is tested first, and one that fails is not stored (422 egress_test_failed with test_result). ' +
          'A host whose own switch fails stays on the upstream it had.',
        params: Params,
        body: UpdateEgressIpRequest,
        response: { 200: EgressIp, ...errorResponses(400, 404), 422: EgressTestFailedError },
      },
    },
    (request) => egressIps.update(request.params.ipID, request.body, actorOf(principalOf(request))),
  );

  app.delete(
    '/egress-ips/:ipID',
    {
      schema: {
        tags,
        operationId: 'deleteEgressIp',
        summary: 'Delete an egress IP; 409 egress_ip_bound (with host_ids) while hosts are bound to it',
        params: Params,
        response: { 204: NoContent, ...errorResponses(404, 409) },
      },
    },
    async (request, reply) => {
      await egressIps.delete(request.params.ipID, actorOf(principalOf(request)));
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/egress-ips/:ipID/test',
    {
      schema: {
        tags,
        operationId: 'testEgressIp',
        summary: 'Test the upstream: connectivity, exit IP match and DNS leak; ends within 30 seconds',
        params: Params,
        response: { 200: EgressTestResult, ...errorResponses(404) },
      },
    },
    (request) => egressIps.test(request.params.ipID, actorOf(principalOf(request))),
  );
}
