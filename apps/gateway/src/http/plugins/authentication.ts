import type { Role } from '@ccp/api';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuthService } from '../../domain/access/auth-service.js';
import type { Principal } from '../../domain/access/principal.js';
import { errors } from '../../domain/errors.js';
import { bearerToken } from '../../shared/bearer-token.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route is one a browser opens without a way to add a header (EventSource): `?token=` is accepted. */
    tokenInQuery?: boolean;
  }
}

/**
 * The bearer token from the Authorization header, or from `?token=` on the routes that allow it. Elsewhere a
 * `?token=` is refused, not ignored: tokens in URLs end up in proxy and access logs, and the caller should know.
 */
export function tokenOf(request: FastifyRequest): string | null {
  const query = request.query as { token?: unknown } | undefined;
  if (query?.token !== undefined && !request.routeOptions.config.tokenInQuery) {
    throw errors.unauthorized(
      'Send the token in the Authorization header; ?token= is accepted only on the event streams',
    );
  }
  const header = bearerToken(request.headers.authorization);
  if (header !== undefined) return header;
  return typeof query?.token === 'string' && query.token ? query.token : null;
}

/** An onRequest hook that admits only valid tokens of the given role. */
export function requireRole(auth: AuthService, role: Role) {
  return async (request: FastifyRequest, _reply: FastifyReply): Promise<void> => {
    const token = tokenOf(request);
    if (!token) throw errors.unauthorized('A bearer token is required');
    const principal = await auth.authenticate(token);
    if (principal.role !== role) {
      throw errors.forbidden(
        role === 'admin' ? 'This endpoint needs an admin token' : 'This endpoint needs a user token',
      );
    }
    request.principal = principal;
  };
}

/** The principal set by `requireRole`; routes behind the hook can rely on it. */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw errors.unauthorized();
  return request.principal;
}
