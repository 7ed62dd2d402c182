import { Health, LoginRequest, LoginResponse } from '@ccp/api';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { errorResponses } from '../../schemas.js';
import type { HttpServices } from '../../services.js';

export function registerPublicRoutes(app: Api, services: HttpServices): void {
  app.get(
    '/healthz',
    {
      schema: {
        tags: ['public'] satisfies ApiTag[],
        operationId: 'getHealth',
        summary: 'Health of the gateway, its database and its container engine',
        response: { 200: Health, 503: Health },
      },
    },
    async (_request, reply) => {
      const health = await services.status.health();
      return reply.status(health.status === 'ok' ? 200 : 503).send(health);
    },
  );

  for (const url of ['/v1/auth/login', '/v1/admin/login']) {
    const legacy = url === '/v1/admin/login';
    app.post(
      url,
      {
        schema: {
          tags: ['auth'] satisfies ApiTag[],
          operationId: legacy ? 'adminLogin' : 'login',
          summary: legacy ? 'Log in (legacy alias of /v1/auth/login)' : 'Log in',
          ...(legacy ? { deprecated: true } : {}),
          body: LoginRequest,
          response: { 200: LoginResponse, ...errorResponses(400, 401, 403, 429) },
        },
      },
      (request) => services.auth.login(request.body.username, request.body.password, request.ip),
    );
  }
}
