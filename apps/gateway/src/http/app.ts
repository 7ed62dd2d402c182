import { randomUUID } from 'node:crypto';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyServerOptions } from 'fastify';
import type { Logger } from 'pino';
import type { Api } from './api.js';
import { API_TAGS } from './api-tags.js';
import { registerDashboard } from './plugins/dashboard.js';
import { registerErrorHandling } from './plugins/error-handler.js';
import type { GatewayMetrics } from './plugins/metrics.js';
import { registerSecurityHeaders } from './plugins/security-headers.js';
import { registerValidation } from './plugins/validation.js';
import { adminRoutes } from './routes/admin/index.js';
import { registerDesktopProxyRoutes } from './routes/portal/host-desktop.js';
import { registerEntryScriptRoute } from './routes/public/access.js';
import { publicRoutes } from './routes/public/index.js';
import { userRoutes } from './routes/user/index.js';
import type { HttpServices } from './services.js';

export const API_VERSION = '0.1.0';

/** A Fastify instance with the gateway's request ids, error format and validation. */
function createApp(logger: Logger | false, trustProxy: string[]): Api {
  const options: FastifyServerOptions = {
    // Behind the listed proxies the client address (rate limits, event log) comes from X-Forwarded-For.
    ...(trustProxy.length > 0 ? { trustProxy: trustProxy.join(',') } : {}),
    bodyLimit: 1024 * 1024,
    genReqId: (request) => {
      const given = request.headers['x-request-id'];
      return typeof given === 'string' && /^[\w.-]{1,64}$/.test(given) ? given : randomUUID();
    },
    requestIdHeader: false,
    connectionTimeout: 120_000,
    keepAliveTimeout: 10_000,
    return503OnClosing: true,
  };
  const app = Fastify({
    ...options,
    loggerInstance: logger === false ? undefined : logger.child({ component: 'http' }),
    logger: logger === false ? false : undefined,
  } as FastifyServerOptions).withTypeProvider<TypeBoxTypeProvider>() as unknown as Api;

  app.decorateRequest('principal', null);
  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  registerSecurityHeaders(app);
  registerErrorHandling(app);
  registerValidation(app);
  return app;
}

export async function buildHttpApp(
  services: HttpServices,
  logger: Logger | false,
  metrics?: GatewayMetrics,
): Promise<Api> {
  const app = createApp(logger, services.config.trustProxy);
  metrics?.register(app, services.auth);

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'cloud-cli-proxy gateway API',
        version: API_VERSION,
        description:
          'Control plane for remote workspaces whose traffic leaves only through an assigned egress IP. ' +
          'Errors are always `{error, code, details?}`; timestamps are RFC 3339 UTC.',
      },
      // The gateway that serves this document: clients resolve paths against its address.
      servers: [{ url: '/', description: 'the gateway serving this document' }],
      tags: API_TAGS.map((tag) => ({ ...tag })),
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } } },
    },
    hideUntagged: true,
  });

  await app.register(async (scope) => publicRoutes(scope as unknown as Api, services));
  app.get('/v1/openapi.json', { schema: { hide: true } }, () => app.swagger());

  await app.register(async (scope) => adminRoutes(scope as unknown as Api, services), {
    prefix: '/v1/admin',
  });
  await app.register(async (scope) => userRoutes(scope as unknown as Api, services), { prefix: '/v1/user' });

  await registerDesktopProxyRoutes(app, services);
  await registerDashboard(app);
  return app;
}

/**
 * The listener on ENTRY_PORT: only the entry scripts, so the short link works without a port. Anything else
 * asked here (an API call from a client given this address) is told where the API is, not "not found".
 */
export function buildEntryApp(services: HttpServices, logger: Logger | false): Api {
  const app = createApp(logger, services.config.trustProxy);
  registerEntryScriptRoute(app, services);
  const apiUrl = services.config.publicApiUrl;
  app.all('/*', { schema: { hide: true } }, (_request, reply) =>
    reply.status(404).send({
      error: `This is the gateway's entry-link port, which serves only /entry/<short id>; the API is at ${apiUrl}`,
      code: 'wrong_port',
      api_url: apiUrl,
    }),
  );
  return app;
}
