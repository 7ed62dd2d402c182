import {
  AddSshKeyRequest,
  CreatedUser,
  CreateUserRequest,
  ExpiryRequest,
  GeneratedSshKey,
  GenerateSshKeyRequest,
  PatchUserRequest,
  RotatedPassword,
  SshCredentials,
  SshKey,
  SshKeyList,
  User,
  UserList,
  UserResources,
  UserResourcesList,
  UserResourcesRequest,
} from '@ccp/api';
import { actorOf } from '../../../domain/access/principal.js';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { principalOf } from '../../plugins/authentication.js';
import { bodyOptional, errorResponses, KeyParams, NoContent, UserIdParams } from '../../schemas.js';
import type { HttpServices } from '../../services.js';

const tags: ApiTag[] = ['admin: users'];

export function registerAdminUserRoutes(app: Api, { users, sshKeys, resources }: HttpServices): void {
  app.get(
    '/quotas',
    {
      schema: {
        tags,
        operationId: 'listQuotas',
        summary: "Every user's resource defaults, quotas and what their hosts take of each",
        response: { 200: UserResourcesList },
      },
    },
    async () => ({ users: await resources.listUserResources() }),
  );

  app.get(
    '/users/:userID/resources',
    {
      schema: {
        tags,
        operationId: 'getUserResources',
        summary:
          "A user's resource defaults for hosts, quotas (null: unlimited) and what the hosts use of them",
        params: UserIdParams,
        response: { 200: UserResources, ...errorResponses(404) },
      },
    },
    async (request) => resources.userResources(request.params.userID),
  );

  app.put(
    '/users/:userID/resources',
    {
      schema: {
        tags,
        operationId: 'setUserResources',
        summary:
          "Change a user's defaults for hosts without their own values and the user's quotas; each field given " +
          "replaces the stored one, null clears it (default: the gateway's; quota: unlimited). Lowering a quota " +
          'below its use stops nothing: it refuses what would add to it',
        params: UserIdParams,
        body: UserResourcesRequest,
        response: { 200: UserResources, ...errorResponses(400, 404) },
      },
    },
    async (request) =>
      resources.setUserResources(request.params.userID, request.body, actorOf(principalOf(request))),
  );

  app.post(
    '/users',
    {
      schema: {
        tags,
        operationId: 'createUser',
        summary: 'Create a user',
        body: CreateUserRequest,
        response: { 201: CreatedUser, ...errorResponses(400, 409) },
      },
    },
    async (request, reply) =>
      reply.status(201).send(await users.create(request.body, actorOf(principalOf(request)))),
  );

  app.get(
    '/users',
    { schema: { tags, operationId: 'listUsers', summary: 'List users', response: { 200: UserList } } },
    async () => ({
      users: await users.list(),
    }),
  );

  app.get(
    '/users/:userID',
    {
      schema: {
        tags,
        operationId: 'getUser',
        summary: 'Get a user',
        params: UserIdParams,
        response: { 200: User, ...errorResponses(404) },
      },
    },
    (request) => users.get(request.params.userID),
  );

  app.patch(
    '/users/:userID',
    {
      schema: {
        tags,
        operationId: 'setUserStatus',
        summary: 'Enable or disable a user',
        params: UserIdParams,
        body: PatchUserRequest,
        response: { 200: User, ...errorResponses(400, 404, 409) },
      },
    },
    (request) => users.setStatus(request.params.userID, request.body.status, actorOf(principalOf(request))),
  );

  app.delete(
    '/users/:userID',
    {
      schema: {
        tags,
        operationId: 'deleteUser',
        summary: 'Delete a user with their hosts, containers and home volumes',
        params: UserIdParams,
        response: { 204: NoContent, ...errorResponses(404, 409) },
      },
    },
    async (request, reply) => {
      await users.delete(request.params.userID, actorOf(principalOf(request)));
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/users/:userID/rotate-password',
    {
      schema: {
        tags,
        operationId: 'rotateUserPassword',
        summary: 'Replace the login password with a generated one (shown once)',
        params: UserIdParams,
        response: { 200: RotatedPassword, ...errorResponses(404) },
      },
    },
    async (request) => ({
      new_password: await users.rotatePassword(request.params.userID, actorOf(principalOf(request))),
    }),
  );

  app.put(
    '/users/:userID/expiry',
    {
      schema: {
        tags,
        operationId: 'setUserExpiry',
        summary: 'Set (timestamp) or clear (null) the expiry',
        params: UserIdParams,
        body: ExpiryRequest,
        response: { 200: User, ...errorResponses(400, 404, 409) },
      },
    },
    (request) =>
      users.setExpiry(request.params.userID, request.body.expires_at, actorOf(principalOf(request))),
  );

  app.post(
    '/users/:userID/credentials/regenerate',
    {
      schema: {
        tags,
        operationId: 'regenerateUserSshCredentials',
        summary: 'Regenerate the user-level SSH password',
        params: UserIdParams,
        response: { 200: SshCredentials, ...errorResponses(404) },
      },
    },
    (request) => users.regenerateSshCredentials(request.params.userID, actorOf(principalOf(request))),
  );

  app.get(
    '/users/:userID/ssh-keys',
    {
      schema: {
        tags,
        operationId: 'listUserSshKeys',
        summary: "List a user's SSH keys",
        params: UserIdParams,
        response: { 200: SshKeyList, ...errorResponses(404) },
      },
    },
    async (request) => ({ keys: await sshKeys.list(request.params.userID) }),
  );

  app.post(
    '/users/:userID/ssh-keys',
    {
      schema: {
        tags,
        operationId: 'addUserSshKey',
        summary: 'Add an SSH public key to a user',
        params: UserIdParams,
        body: AddSshKeyRequest,
        response: { 201: SshKey, ...errorResponses(400, 404, 409) },
      },
    },
    async (request, reply) =>
      reply
        .status(201)
        .send(
          await sshKeys.add(
            request.params.userID,
            request.body.public_key,
            request.body.label,
            actorOf(principalOf(request)),
          ),
        ),
  );

  app.post(
    '/users/:userID/ssh-keys/generate',
    {
      schema: {
        tags,
        operationId: 'generateUserSshKey',
        summary: 'Generate an ed25519 key pair for a user; the private key is returned once and not stored',
        params: UserIdParams,
        body: GenerateSshKeyRequest,
        response: { 201: GeneratedSshKey, ...errorResponses(404) },
      },
      preValidation: bodyOptional,
    },
    async (request, reply) =>
      reply
        .status(201)
        .send(
          await sshKeys.generate(request.params.userID, request.body?.label, actorOf(principalOf(request))),
        ),
  );

  app.delete(
    '/users/:userID/ssh-keys/:keyID',
    {
      schema: {
        tags,
        operationId: 'deleteUserSshKey',
        summary: "Delete one of a user's SSH keys",
        params: KeyParams,
        response: { 204: NoContent, ...errorResponses(404) },
      },
    },
    async (request, reply) => {
      await sshKeys.delete(request.params.userID, request.params.keyID, actorOf(principalOf(request)));
      return reply.status(204).send(null);
    },
  );
}
