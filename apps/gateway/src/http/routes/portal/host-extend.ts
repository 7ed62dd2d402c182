import { ExtendRequest, Host } from '@ccp/api';
import Type from 'typebox';
import type { Portal } from '../../../vnc/vnc-access.js';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { principalOf } from '../../plugins/authentication.js';
import { bodyOptional, errorResponses } from '../../schemas.js';
import type { HttpServices } from '../../services.js';

const HostParams = Type.Object({ hostID: Type.String({ format: 'uuid' }) });

/**
 * `POST /hosts/{id}/extend` of one portal: holds off the host's idle, lifetime and schedule stops; the admin may
 * extend any host, a user their own.
 */
export function registerHostExtendRoute(
  app: Api,
  { access, hosts, hostPolicies }: HttpServices,
  portal: Portal,
) {
  const tags: ApiTag[] = [portal === 'admin' ? 'admin: hosts' : 'user portal'];
  app.post(
    '/hosts/:hostID/extend',
    {
      schema: {
        tags,
        operationId: portal === 'admin' ? 'extendHost' : 'extendOwnHost',
        summary:
          `Keep ${portal === 'admin' ? 'a' : 'an own'} running host from its policy's next stop (idle, lifetime, ` +
          'schedule) for `seconds` (HOST_EXTEND_SECONDS) past it; 409 host_not_running',
        params: HostParams,
        body: ExtendRequest,
        response: { 200: Host, ...errorResponses(400, 404, 409) },
      },
      preValidation: bodyOptional,
    },
    async (request) => {
      const principal = principalOf(request);
      await hostPolicies.extend(
        await access.requireHost(principal, request.params.hostID, 'operate'),
        request.body.seconds,
      );
      return hosts.get(await access.requireHost(principal, request.params.hostID, 'view'));
    },
  );
}
