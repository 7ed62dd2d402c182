import type { Role } from '@ccp/api';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuthService } from '../../domain/auth-service.js';
import { errors } from '../../domain/errors.js';
import type { Principal } from '../../domain/principal.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
}

/** The bearer token from the Authorization header, or from `?token=` for clients that cannot set headers. */
export function tokenOf(request: FastifyRequest): string | null {
  const header = request.headers.authorization;
  if (header) {
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    return match ? match[1]! : null;
  }
  const query = request.query as { token?: unknown } | undefined;
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
