import { Host, HostList, Task, TaskAccepted } from '@ccp/api';
import Type from 'typebox';
import { errors } from '../../domain/errors.js';
import { actorOf } from '../../domain/principal.js';
import type { Api } from '../api.js';
import { principalOf } from '../plugins/authentication.js';
import { errorResponses } from '../schemas.js';
import type { HttpServices } from '../services.js';

const HostParams = Type.Object({ hostID: Type.String({ format: 'uuid' }) });
const tags = ['user portal'];

export function registerUserHostRoutes(app: Api, { access, hosts, lifecycle, tasks }: HttpServices): void {
  app.get(
    '/hosts',
    { schema: { tags, summary: 'Own hosts', response: { 200: HostList } } },
    async (request) => ({
      hosts: await hosts.list('user', principalOf(request).id),
    }),
  );

  app.get(
    '/hosts/:hostID',
    {
      schema: {
        tags,
        summary: 'Own host details',
        params: HostParams,
        response: { 200: Host, ...errorResponses(404) },
      },
    },
    (request) => hosts.getOwn(principalOf(request), request.params.hostID),
  );

  // The owner's lifecycle calls are the admin's, with the same rules (no_egress_bound, host_busy); only the
  // task's address differs, so the owner can follow it.
  const action = (name: 'start' | 'stop' | 'rebuild', summary: string) =>
    app.post(
      `/hosts/:hostID/${name}`,
      {
        schema: {
          tags,
          summary,
          params: HostParams,
          response: { 202: TaskAccepted, ...errorResponses(404, 409) },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const host = await access.requireHost(principal, request.params.hostID, 'operate');
        const accepted = await lifecycle[name](host.id, actorOf(principal));
        return reply.status(202).send({ ...accepted, status_url: `/v1/user/tasks/${accepted.task_id}` });
      },
    );
  action(
    'start',
    'Start an own host (409 no_egress_bound without a binding, 409 host_busy while a task runs)',
  );
  action(
    'stop',
    'Stop an own host; a start still running is cancelled first (that task fails with cancelled)',
  );
  action('rebuild', 'Rebuild an own host; the home volume is kept');

  app.get(
    '/tasks/:taskID',
    {
      schema: {
        tags,
        summary: 'One of the own tasks (progress of a start, stop or rebuild)',
        params: Type.Object({ taskID: Type.String({ format: 'uuid' }) }),
        response: { 200: Task, ...errorResponses(404) },
      },
    },
    async (request) => {
      const task = await tasks.get(request.params.taskID);
      if (task.user_id !== principalOf(request).id) throw errors.notFound('Task');
      return task;
    },
  );
}
