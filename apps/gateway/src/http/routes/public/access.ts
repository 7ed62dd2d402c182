import {
  BOOTSTRAP_SECRET_HEADER,
  BootstrapHandoff,
  BootstrapHandoffHeaders,
  BootstrapSessionAccepted,
  BootstrapSessionRequest,
  BootstrapTask,
  EntryAuthRequest,
  EntryCheck,
  EntryCheckRequest,
  EntryReady,
  EntryStarting,
  ShortIdParams,
  TaskIdParams,
} from '@ccp/api';
import Type from 'typebox';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { errorResponses, textResponse } from '../../schemas.js';
import type { HttpServices } from '../../services.js';

const tags: ApiTag[] = ['access'];
const ShellScript = Type.String({ description: 'a POSIX sh script, to be piped to `sh`' });
const SCRIPT_TYPE = 'text/x-shellscript; charset=utf-8';
const script = (description: string) => textResponse('text/x-shellscript', description, ShellScript);

/** `GET /entry/{shortId}`: served on the API port and on ENTRY_PORT. */
export function registerEntryScriptRoute(app: Api, { entry, scripts }: HttpServices): void {
  app.get(
    '/entry/:shortId',
    {
      schema: {
        tags,
        operationId: 'getEntryScript',
        summary:
          "The entry script of a host: asks for the owner's password, starts the host if needed, connects",
        params: ShortIdParams,
        response: { 200: script('The entry script'), ...errorResponses(404) },
      },
    },
    async (request, reply) => {
      const host = await entry.hostFor(request.params.shortId);
      return reply.type(SCRIPT_TYPE).header('cache-control', 'no-store').send(scripts.entry(host.short_id));
    },
  );
}

export function registerAccessRoutes(app: Api, services: HttpServices): void {
  const { entry, bootstrap, scripts } = services;
  registerEntryScriptRoute(app, services);

  app.post(
    '/v1/entry/:shortId/auth',
    {
      schema: {
        tags,
        operationId: 'authenticateEntry',
        summary: "Entry authentication with the host owner's password: SSH parameters, or a start under way",
        params: ShortIdParams,
        body: EntryAuthRequest,
        response: { 200: EntryReady, 202: EntryStarting, ...errorResponses(400, 401, 403, 404, 409, 429) },
      },
    },
    async (request, reply) => {
      const { password, task_id } = request.body;
      const answer = await entry.authenticate(request.params.shortId, password, request.ip, task_id ?? null);
      return reply.status(answer.status).send(answer.body);
    },
  );

  app.post(
    '/v1/entry/:shortId/check',
    {
      schema: {
        tags: ['access'],
        operationId: 'checkEntry',
        summary:
          "Checks a short ID and its owner's password and tells the host's state, starting nothing (ccp init, ccp doctor)",
        params: ShortIdParams,
        body: EntryCheckRequest,
        response: { 200: EntryCheck, ...errorResponses(400, 401, 403, 404, 429) },
      },
    },
    (request) => entry.check(request.params.shortId, request.body.password, request.ip),
  );

  app.get(
    '/v1/bootstrap/script',
    {
      schema: {
        tags,
        operationId: 'getBootstrapScript',
        summary: 'The bootstrap script: asks for username and password, starts the host, connects',
        response: { 200: script('The bootstrap script') },
      },
    },
    async (_request, reply) =>
      reply.type(SCRIPT_TYPE).header('cache-control', 'no-store').send(scripts.bootstrap()),
  );

  app.post(
    '/v1/bootstrap/sessions',
    {
      schema: {
        tags,
        operationId: 'createBootstrapSession',
        summary: 'Begin a bootstrap session: starts the user’s host (or succeeds at once when it runs)',
        body: BootstrapSessionRequest,
        response: { 202: BootstrapSessionAccepted, ...errorResponses(400, 401, 403, 404, 409, 429) },
      },
    },
    async (request, reply) => reply.status(202).send(await bootstrap.createSession(request.body, request.ip)),
  );

  app.get(
    '/v1/bootstrap/tasks/:taskID',
    {
      schema: {
        tags,
        operationId: 'getBootstrapTask',
        summary: 'Status of a bootstrap task',
        params: TaskIdParams,
        response: { 200: BootstrapTask, ...errorResponses(404) },
      },
    },
    (request) => bootstrap.taskStatus(request.params.taskID),
  );

  app.get(
    '/v1/bootstrap/tasks/:taskID/handoff',
    {
      schema: {
        tags,
        operationId: 'getBootstrapHandoff',
        summary:
          'SSH parameters with a one-time ticket (2 minutes) once the bootstrap task has succeeded, for the client holding the session’s handoff_secret',
        params: TaskIdParams,
        headers: BootstrapHandoffHeaders,
        response: { 200: BootstrapHandoff, ...errorResponses(403, 404, 409) },
      },
    },
    (request) =>
      bootstrap.handoff(request.params.taskID, request.headers[BOOTSTRAP_SECRET_HEADER], request.ip),
  );
}
