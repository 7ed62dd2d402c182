import { LifecyclePolicies, LifecyclePolicy } from '@ccp/api';
import Type from 'typebox';
import { actorOf } from '../../../domain/access/principal.js';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { principalOf } from '../../plugins/authentication.js';
import { errorResponses } from '../../schemas.js';
import type { HttpServices } from '../../services.js';

const HostParams = Type.Object({ hostID: Type.String({ format: 'uuid' }) });
const UserParams = Type.Object({ userID: Type.String({ format: 'uuid' }) });

/** Idle stop, maximum lifetime and weekly schedule: a host's own, and a user's defaults for their hosts. */
export function registerAdminLifecyclePolicyRoutes(app: Api, { access, hostPolicies }: HttpServices): void {
  const hostTags: ApiTag[] = ['admin: hosts'];
  app.get(
    '/hosts/:hostID/lifecycle-policy',
    {
      schema: {
        tags: hostTags,
        operationId: 'getHostLifecyclePolicy',
        summary:
          "A host's lifecycle policy: its own, its owner's defaults, the gateway's and the one it follows",
        params: HostParams,
        response: { 200: LifecyclePolicies, ...errorResponses(404) },
      },
    },
    async (request) =>
      hostPolicies.ofHost(await access.requireHost(principalOf(request), request.params.hostID, 'view')),
  );
  app.put(
    '/hosts/:hostID/lifecycle-policy',
    {
      schema: {
        tags: hostTags,
        operationId: 'setHostLifecyclePolicy',
        summary: "Set a host's own lifecycle policy (null fields: its owner's defaults)",
        params: HostParams,
        body: LifecyclePolicy,
        response: { 200: LifecyclePolicies, ...errorResponses(400, 404) },
      },
    },
    async (request) =>
      hostPolicies.setHostPolicy(
        await access.requireHost(principalOf(request), request.params.hostID, 'manage'),
        request.body,
      ),
  );

  const userTags: ApiTag[] = ['admin: users'];
  app.get(
    '/users/:userID/host-policy',
    {
      schema: {
        tags: userTags,
        operationId: 'getUserHostPolicy',
        summary: "The defaults of a user's hosts' lifecycle policy (null fields: the gateway's)",
        params: UserParams,
        response: { 200: LifecyclePolicy, ...errorResponses(404) },
      },
    },
    async (request) => hostPolicies.userPolicy(request.params.userID),
  );
  app.put(
    '/users/:userID/host-policy',
    {
      schema: {
        tags: userTags,
        operationId: 'setUserHostPolicy',
        summary: "Set the defaults of a user's hosts' lifecycle policy (null fields: the gateway's)",
        params: UserParams,
        body: LifecyclePolicy,
        response: { 200: LifecyclePolicy, ...errorResponses(400, 404) },
      },
    },
    async (request) =>
      hostPolicies.setUserPolicy(request.params.userID, request.body, actorOf(principalOf(request))),
  );
}
