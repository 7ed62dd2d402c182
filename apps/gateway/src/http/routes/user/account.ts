import {
  AddSshKeyRequest,
  ChangePasswordRequest,
  EmptyObject,
  GeneratedSshKey,
  GenerateSshKeyRequest,
  SshKey,
  SshKeyList,
  UserResources,
} from '@ccp/api';
import { actorOf } from '../../../domain/access/principal.js';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { principalOf } from '../../plugins/authentication.js';
import { bodyOptional, errorResponses, NoContent, OwnKeyParams } from '../../schemas.js';
import type { HttpServices } from '../../services.js';

const tags: ApiTag[] = ['user portal'];

export function registerUserAccountRoutes(app: Api, { users, sshKeys, resources }: HttpServices): void {
  app.get(
    '/resources',
    {
      schema: {
        tags,
        operationId: 'getOwnResources',
        summary:
          'Own quotas (null: unlimited), what the own hosts take of them, and the defaults new hosts get',
        response: { 200: UserResources },
      },
    },
    async (request) => resources.userResources(principalOf(request).id),
  );

  app.post(
    '/change-password',
    {
      schema: {
        tags,
        operationId: 'changeOwnPassword',
        summary: 'Change the own password; every token of the account ends, log in again',
        body: ChangePasswordRequest,
        response: { 200: EmptyObject, ...errorResponses(400) },
      },
    },
    async (request) => {
      await users.changeOwnPassword(
        principalOf(request),
        request.body.old_password,
        request.body.new_password,
        request.ip,
      );
      return {};
    },
  );

  app.get(
    '/ssh-keys',
    {
      schema: {
        tags,
        operationId: 'listOwnSshKeys',
        summary: 'List own SSH keys',
        response: { 200: SshKeyList },
      },
    },
    async (request) => ({
      keys: await sshKeys.list(principalOf(request).id),
    }),
  );

  app.post(
    '/ssh-keys',
    {
      schema: {
        tags,
        operationId: 'addOwnSshKey',
        summary: 'Add an own SSH public key',
        body: AddSshKeyRequest,
        response: { 201: SshKey, ...errorResponses(400, 409) },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      const key = await sshKeys.add(
        principal.id,
        request.body.public_key,
        request.body.label,
        actorOf(principal),
      );
      return reply.status(201).send(key);
    },
  );

  app.post(
    '/ssh-keys/generate',
    {
      schema: {
        tags,
        operationId: 'generateOwnSshKey',
        summary: 'Generate an own ed25519 key pair; the private key is returned once and not stored',
        body: GenerateSshKeyRequest,
        response: { 201: GeneratedSshKey },
      },
      preValidation: bodyOptional,
    },
    async (request, reply) => {
      const principal = principalOf(request);
      return reply
        .status(201)
        .send(await sshKeys.generate(principal.id, request.body?.label, actorOf(principal)));
    },
  );

  app.delete(
    '/ssh-keys/:keyID',
    {
      schema: {
        tags,
        operationId: 'deleteOwnSshKey',
        summary: 'Delete an own SSH key',
        params: OwnKeyParams,
        response: { 204: NoContent, ...errorResponses(404) },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      await sshKeys.delete(principal.id, request.params.keyID, actorOf(principal));
      return reply.status(204).send(null);
    },
  );
}
