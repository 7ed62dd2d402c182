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

  app.post(
    '/hosts/:hostID/rebuild',
    {
      schema: {
        tags,
        summary: 'Rebuild an own host; the home volume is kept',
        params: HostParams,
        response: { 202: TaskAccepted, ...errorResponses(404, 409) },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      const host = await access.requireHost(principal, request.params.hostID, 'operate');
      const accepted = await lifecycle.rebuild(host.id, actorOf(principal));
      return reply.status(202).send({ ...accepted, status_url: `/v1/user/tasks/${accepted.task_id}` });
    },
  );

  app.get(
    '/tasks/:taskID',
    {
      schema: {
        tags,
        summary: 'One of the own tasks (progress of a rebuild)',
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
