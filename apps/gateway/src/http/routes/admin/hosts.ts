import {
  Binding,
  BuildImagesRequest,
  CreateBindingRequest,
  CreatedHost,
  CreateHostRequest,
  Host,
  HostList,
  HostResourcesRequest,
  ImageList,
  Task,
  TaskAccepted,
  TaskList,
  TaskQuery,
} from '@ccp/api';
import Type from 'typebox';
import { actorOf } from '../../../domain/access/principal.js';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { principalOf } from '../../plugins/authentication.js';
import { bodyOptional, errorResponses, NoContent } from '../../schemas.js';
import type { HttpServices } from '../../services.js';
import { registerHostActions } from '../portal/host-actions.js';

const HostParams = Type.Object({ hostID: Type.String({ format: 'uuid' }) });
const BindingParams = Type.Object({ bindingID: Type.String({ format: 'uuid' }) });
const TaskParams = Type.Object({ taskID: Type.String({ format: 'uuid' }) });

export function registerAdminHostRoutes(
  app: Api,
  { access, hosts, lifecycle, resources, tasks, images }: HttpServices,
): void {
  const tags: ApiTag[] = ['admin: hosts'];
  app.post(
    '/hosts',
    {
      schema: {
        tags,
        operationId: 'createHost',
        summary:
          "Create a host for a user (optionally bound to an egress IP, optionally pinned to a node); returns the owner's SSH details",
        body: CreateHostRequest,
        // 409: node_unavailable (the pinned node is not heartbeating), no_node_available (no live node has room),
        // quota_exceeded (the user's quota of hosts or home would be passed).
        response: { 201: CreatedHost, ...errorResponses(400, 404, 409) },
      },
    },
    async (request, reply) =>
      reply.status(201).send(await hosts.create(request.body, actorOf(principalOf(request)))),
  );

  app.get(
    '/hosts',
    { schema: { tags, operationId: 'listHosts', summary: 'List hosts', response: { 200: HostList } } },
    async () => ({
      hosts: await hosts.list('admin'),
    }),
  );

  app.get(
    '/hosts/:hostID',
    {
      schema: {
        tags,
        operationId: 'getHost',
        summary: 'Host details',
        params: HostParams,
        response: { 200: Host, ...errorResponses(404) },
      },
    },
    async (request) =>
      hosts.get(await access.requireHost(principalOf(request), request.params.hostID, 'view')),
  );

  app.put(
    '/hosts/:hostID/resources',
    {
      schema: {
        tags,
        operationId: 'resizeHost',
        summary:
          "Change the host's CPUs, memory, processes or home size (null: back to the default); a running host " +
          'gets memory, CPUs and processes at once, the home grows in place and never shrinks (409 home_shrink); ' +
          '409 quota_exceeded past a quota of its owner, 409 resize_refused when the engine refuses (memory in use)',
        params: HostParams,
        body: HostResourcesRequest,
        response: { 200: Host, ...errorResponses(400, 404, 409) },
      },
    },
    async (request) =>
      resources.resizeHost(
        await access.requireHost(principalOf(request), request.params.hostID, 'manage'),
        request.body,
      ),
  );

  registerHostActions(
    app,
    tags,
    {
      start: {
        operationId: 'startHost',
        summary:
          'Start the host (409 no_egress_bound without a binding, 409 host_busy while a task runs, 409 quota_exceeded past a quota of running hosts, CPUs or memory)',
      },
      stop: {
        operationId: 'stopHost',
        summary: 'Stop the host; a start still running is cancelled first (that task fails with cancelled)',
      },
      rebuild: {
        operationId: 'rebuildHost',
        summary: 'Recreate the workspace from the current image; the home volume and SSH host keys are kept',
      },
    },
    async (action, hostId, request) =>
      lifecycle[action](await access.requireHost(principalOf(request), hostId, 'operate')),
  );

  app.delete(
    '/hosts/:hostID',
    {
      schema: {
        tags,
        operationId: 'deleteHost',
        summary:
          'Delete the host with its containers and home volume; a start still running is cancelled first, ' +
          'another task answers 409 host_busy',
        params: HostParams,
        response: { 204: NoContent, ...errorResponses(404, 409) },
      },
    },
    async (request, reply) => {
      await hosts.delete(await access.requireHost(principalOf(request), request.params.hostID, 'manage'));
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/bindings',
    {
      schema: {
        tags: ['admin: bindings'] satisfies ApiTag[],
        operationId: 'createBinding',
        summary: 'Bind an egress IP to a host (the oldest binding carries the traffic, others are standby)',
        body: CreateBindingRequest,
        response: { 201: Binding, ...errorResponses(400, 404, 409) },
      },
    },
    async (request, reply) => reply.status(201).send(await hosts.bind(principalOf(request), request.body)),
  );

  app.delete(
    '/bindings/:bindingID',
    {
      schema: {
        tags: ['admin: bindings'] satisfies ApiTag[],
        operationId: 'deleteBinding',
        summary: 'Unbind (409 no_egress_bound for the last binding of a running host)',
        params: BindingParams,
        response: { 204: NoContent, ...errorResponses(404, 409) },
      },
    },
    async (request, reply) => {
      await hosts.unbind(principalOf(request), request.params.bindingID);
      return reply.status(204).send(null);
    },
  );

  app.get(
    '/tasks',
    {
      schema: {
        tags: ['admin: tasks'] satisfies ApiTag[],
        operationId: 'listTasks',
        summary: 'Tasks, newest first',
        querystring: TaskQuery,
        response: { 200: TaskList, ...errorResponses(400) },
      },
    },
    async (request) => ({ tasks: await tasks.list(request.query) }),
  );

  app.get(
    '/tasks/:taskID',
    {
      schema: {
        tags: ['admin: tasks'] satisfies ApiTag[],
        operationId: 'getTask',
        summary: 'One task',
        params: TaskParams,
        response: { 200: Task, ...errorResponses(404) },
      },
    },
    async (request) => tasks.get(await access.requireTask(principalOf(request), request.params.taskID)),
  );

  app.get(
    '/images',
    {
      schema: {
        tags,
        operationId: 'listImages',
        summary: 'Whether the managed images are built (also announced on the image-status SSE topic)',
        response: { 200: ImageList },
      },
    },
    async () => ({ images: await images.check() }),
  );

  app.post(
    '/images/build',
    {
      schema: {
        tags,
        operationId: 'buildImages',
        summary:
          "Build the managed images on the gateway's machine with image/build.sh (needs root); a task on no host, " +
          'one at a time (409 images_busy)',
        body: BuildImagesRequest,
        response: { 202: TaskAccepted, ...errorResponses(409) },
      },
      preValidation: bodyOptional,
    },
    async (request, reply) =>
      reply
        .status(202)
        .send(await images.build(actorOf(principalOf(request)), request.body.rebuild ?? false)),
  );
}
