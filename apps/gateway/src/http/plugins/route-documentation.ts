import type { FastifySchema, RouteOptions } from 'fastify';
import { errorResponses } from '../schemas.js';

/** Marks a public route in the OpenAPI document: it needs no token. */
export function documentNoAuth(route: RouteOptions): void {
  route.schema = { ...(route.schema ?? {}), security: [] } as FastifySchema;
}

/** Marks a protected route in the OpenAPI document: bearer token, and the 401/403 answers it can give. */
export function documentBearerAuth(route: RouteOptions): void {
  const schema = (route.schema ?? {}) as FastifySchema & {
    security?: unknown;
    response?: Record<string, unknown>;
  };
  route.schema = {
    ...schema,
    security: [{ bearer: [] }],
    response: { ...errorResponses(401, 403), ...(schema.response ?? {}) },
  } as FastifySchema;
}
