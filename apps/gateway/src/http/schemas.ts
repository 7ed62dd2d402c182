import { ErrorBody } from '@ccp/api';
import type { FastifyRequest } from 'fastify';
import Type, { type TSchema } from 'typebox';

/** Error responses to list in a route's schema, so they are serialised and documented the same way. */
export function errorResponses(...statuses: number[]) {
  return Object.fromEntries(statuses.map((status) => [status, ErrorBody]));
}

/** A successful response that is not JSON, under its own media type in the API document. */
export function textResponse(mediaType: string, description: string, schema: TSchema) {
  return { description, content: { [mediaType]: { schema } } };
}

export const UserIdParams = Type.Object({ userID: Type.String({ format: 'uuid' }) });
export const KeyParams = Type.Object({
  userID: Type.String({ format: 'uuid' }),
  keyID: Type.String({ format: 'uuid' }),
});
export const OwnKeyParams = Type.Object({ keyID: Type.String({ format: 'uuid' }) });
export const NoContent = Type.Null({ description: 'No content' });

/** For routes whose body is optional: a request without one (the spec's "none") counts as `{}`. */
export const bodyOptional = async (request: FastifyRequest): Promise<void> => {
  request.body ??= {};
};
