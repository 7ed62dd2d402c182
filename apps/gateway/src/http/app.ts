import { randomUUID } from 'node:crypto';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifySchema, type FastifyServerOptions, type RouteOptions } from 'fastify';
import type { Logger } from 'pino';
import type { Api } from './api.js';
import { API_TAGS } from './api-tags.js';
import { requireRole } from './plugins/authentication.js';
import { registerDashboard } from './plugins/dashboard.js';
import { registerErrorHandling } from './plugins/error-handler.js';
import type { GatewayMetrics } from './plugins/metrics.js';
import { registerSecurityHeaders } from './plugins/security-headers.js';
import { registerValidation } from './plugins/validation.js';
import { registerAccessRoutes, registerEntryScriptRoute } from './routes/access.js';
import { registerAdminActivityRoutes } from './routes/admin-activity.js';
import { registerAdminEgressRoutes } from './routes/admin-egress-ips.js';
import { registerAdminHostRoutes } from './routes/admin-hosts.js';
import { registerAdminUserRoutes } from './routes/admin-users.js';
import { registerCliDownloadRoutes, registerCliReleaseRoute } from './routes/cli-download.js';
import { registerDesktopProxyRoutes, registerHostDesktopRoutes } from './routes/host-desktop.js';
import { registerPublicRoutes } from './routes/public.js';
import { registerSseRoute } from './routes/sse.js';
import { registerUserAccountRoutes } from './routes/user-account.js';
import { registerUserHostRoutes } from './routes/user-hosts.js';
import { errorResponses } from './schemas.js';
import type { HttpServices } from './services.js';

export const API_VERSION = '0.1.0';

/** Marks a public route in the OpenAPI document: it needs no token. */
function documentNoAuth(route: RouteOptions): void {
  route.schema = { ...(route.schema ?? {}), security: [] } as FastifySchema;
}

/** Marks a protected route in the OpenAPI document: bearer token, and the 401/403 answers it can give. */
function documentBearerAuth(route: RouteOptions): void {
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

  await app.register(async (scope) => {
    const open = scope as unknown as Api;
    open.addHook('onRoute', documentNoAuth);
    registerPublicRoutes(open, services);
    registerAccessRoutes(open, services);
    registerCliDownloadRoutes(open, services);
  });
  app.get('/v1/openapi.json', { schema: { hide: true } }, () => app.swagger());

  await app.register(
    async (scope) => {
      const admin = scope as unknown as Api;
      admin.addHook('onRoute', documentBearerAuth);
      admin.addHook('onRequest', requireRole(services.auth, 'admin'));
      registerAdminUserRoutes(admin, services);
      registerAdminEgressRoutes(admin, services);
      registerAdminHostRoutes(admin, services);
      registerHostDesktopRoutes(admin, services, 'admin');
      registerAdminActivityRoutes(admin, services);
      registerCliReleaseRoute(admin, services, 'admin');
      registerSseRoute(admin, services, 'admin');
    },
    { prefix: '/v1/admin' },
  );

  await app.register(
    async (scope) => {
      const user = scope as unknown as Api;
      user.addHook('onRoute', documentBearerAuth);
      user.addHook('onRequest', requireRole(services.auth, 'user'));
      registerUserAccountRoutes(user, services);
      registerUserHostRoutes(user, services);
      registerHostDesktopRoutes(user, services, 'user');
      registerCliReleaseRoute(user, services, 'user');
      registerSseRoute(user, services, 'user');
    },
    { prefix: '/v1/user' },
  );

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
