import { EgressPolicy, HostEgressPolicies, UserEgressPolicies } from '@ccp/api';
import Type from 'typebox';
import { actorOf } from '../../../domain/access/principal.js';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { principalOf } from '../../plugins/authentication.js';
import { errorResponses } from '../../schemas.js';
import type { HttpServices } from '../../services.js';

const HostParams = Type.Object({ hostID: Type.String({ format: 'uuid' }) });
const UserParams = Type.Object({ userID: Type.String({ format: 'uuid' }) });

/** What hosts may reach through their upstream: a host's own policy, and a user's default for their hosts. */
export function registerAdminEgressPolicyRoutes(app: Api, { access, egressPolicies }: HttpServices): void {
  const hostTags: ApiTag[] = ['admin: hosts'];
  app.get(
    '/hosts/:hostID/egress-policy',
    {
      schema: {
        tags: hostTags,
        operationId: 'getHostEgressPolicy',
        summary: "A host's egress policy: its own, its owner's default, the gateway's and the one it follows",
        params: HostParams,
        response: { 200: HostEgressPolicies, ...errorResponses(404) },
      },
    },
    async (request) =>
      egressPolicies.ofHost(await access.requireHost(principalOf(request), request.params.hostID, 'view')),
  );
  app.put(
    '/hosts/:hostID/egress-policy',
    {
      schema: {
        tags: hostTags,
        operationId: 'setHostEgressPolicy',
        summary:
          "Set a host's own egress policy; a running host follows it within seconds (its v2ray restarts, sessions stay)",
        params: HostParams,
        body: EgressPolicy,
        response: { 200: HostEgressPolicies, ...errorResponses(400, 404) },
      },
    },
    async (request) =>
      egressPolicies.setHostPolicy(
        await access.requireHost(principalOf(request), request.params.hostID, 'manage'),
        request.body,
      ),
  );
  app.delete(
    '/hosts/:hostID/egress-policy',
    {
      schema: {
        tags: hostTags,
        operationId: 'removeHostEgressPolicy',
        summary:
          "Remove a host's own egress policy: it follows its owner's default (else the gateway's) again",
        params: HostParams,
        response: { 200: HostEgressPolicies, ...errorResponses(404) },
      },
    },
    async (request) =>
      egressPolicies.setHostPolicy(
        await access.requireHost(principalOf(request), request.params.hostID, 'manage'),
        null,
      ),
  );

  const userTags: ApiTag[] = ['admin: users'];
  app.get(
    '/users/:userID/egress-policy',
    {
      schema: {
        tags: userTags,
        operationId: 'getUserEgressPolicy',
        summary: "The default egress policy of a user's hosts, and the gateway's under it",
        params: UserParams,
        response: { 200: UserEgressPolicies, ...errorResponses(404) },
      },
    },
    async (request) => egressPolicies.userPolicy(request.params.userID),
  );
  app.put(
    '/users/:userID/egress-policy',
    {
      schema: {
        tags: userTags,
        operationId: 'setUserEgressPolicy',
        summary:
          "Set the default egress policy of a user's hosts; their running hosts without one of their own follow it",
        params: UserParams,
        body: EgressPolicy,
        response: { 200: UserEgressPolicies, ...errorResponses(400, 404) },
      },
    },
    async (request) =>
      egressPolicies.setUserPolicy(request.params.userID, request.body, actorOf(principalOf(request))),
  );
  app.delete(
    '/users/:userID/egress-policy',
    {
      schema: {
        tags: userTags,
        operationId: 'removeUserEgressPolicy',
        summary:
          "Remove a user's default egress policy: their hosts follow the gateway's (EGRESS_POLICY) again",
        params: UserParams,
        response: { 200: UserEgressPolicies, ...errorResponses(404) },
      },
    },
    async (request) =>
      egressPolicies.setUserPolicy(request.params.userID, null, actorOf(principalOf(request))),
  );
}
