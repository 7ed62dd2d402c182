import { Host, HostEgressPolicies, HostList, Task } from '@ccp/api';
import Type from 'typebox';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { principalOf } from '../../plugins/authentication.js';
import { errorResponses } from '../../schemas.js';
import type { HttpServices } from '../../services.js';
import { registerHostActions } from '../portal/host-actions.js';

const HostParams = Type.Object({ hostID: Type.String({ format: 'uuid' }) });
const tags: ApiTag[] = ['user portal'];

export function registerUserHostRoutes(
  app: Api,
  { access, hosts, lifecycle, tasks, egressPolicies }: HttpServices,
): void {
  app.get(
    '/hosts',
    { schema: { tags, operationId: 'listOwnHosts', summary: 'Own hosts', response: { 200: HostList } } },
    async (request) => ({
      hosts: await hosts.list('user', principalOf(request).id),
    }),
  );

  app.get(
    '/hosts/:hostID',
    {
      schema: {
        tags,
        operationId: 'getOwnHost',
        summary: 'Own host details',
        params: HostParams,
        response: { 200: Host, ...errorResponses(404) },
      },
    },
    async (request) =>
      hosts.get(await access.requireHost(principalOf(request), request.params.hostID, 'view')),
  );

  app.get(
    '/hosts/:hostID/egress-policy',
    {
      schema: {
        tags,
        operationId: 'getOwnHostEgressPolicy',
        summary:
          'What an own host may reach: its egress policy at each level and the one it follows (admins set them)',
        params: HostParams,
        response: { 200: HostEgressPolicies, ...errorResponses(404) },
      },
    },
    async (request) =>
      egressPolicies.ofHost(await access.requireHost(principalOf(request), request.params.hostID, 'view')),
  );

  // The owner's lifecycle calls are the admin's; the task is followed at the owner's own address.
  registerHostActions(
    app,
    tags,
    {
      start: {
        operationId: 'startOwnHost',
        summary: 'Start an own host (409 no_egress_bound without a binding, 409 host_busy while a task runs)',
      },
      stop: {
        operationId: 'stopOwnHost',
        summary:
          'Stop an own host; a start still running is cancelled first (that task fails with cancelled)',
      },
      rebuild: { operationId: 'rebuildOwnHost', summary: 'Rebuild an own host; the home volume is kept' },
    },
    async (action, hostId, request) => {
      const accepted = await lifecycle[action](
        await access.requireHost(principalOf(request), hostId, 'operate'),
      );
      return { ...accepted, status_url: `/v1/user/tasks/${accepted.task_id}` };
    },
  );

  app.get(
    '/tasks/:taskID',
    {
      schema: {
        tags,
        operationId: 'getOwnTask',
        summary: 'One of the own tasks (progress of a start, stop or rebuild)',
        params: Type.Object({ taskID: Type.String({ format: 'uuid' }) }),
        response: { 200: Task, ...errorResponses(404) },
      },
    },
    async (request) => tasks.get(await access.requireTask(principalOf(request), request.params.taskID)),
  );
}
