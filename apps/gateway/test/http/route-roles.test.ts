import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  type RegisteredRoute,
  registeredRoutes,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';

/**
 * Placement is the rule (issue 27): a route in http/routes/admin/ is an admin's, one in user/ a user's, because
 * each folder's index registers its routes behind the folder's one role check. Asked of every route the gateway
 * serves under each prefix, not of a list kept by hand: a route added anywhere in a portal is checked too.
 */
describe('every portal route refuses the wrong caller', () => {
  let t: TestGateway;
  let routes: RegisteredRoute[];
  let userToken: string;
  before(async () => {
    t = await startTestGateway('sqlite');
    // Public routes (the OpenAPI document says `security: []`) may sit under a portal's path: /v1/admin/login.
    const document = t.gateway.http.swagger() as {
      paths: Record<string, Record<string, { security?: unknown[] }>>;
    };
    const isPublic = (route: RegisteredRoute) =>
      document.paths[route.url.replace(/:([A-Za-z]+)/g, '{$1}')]?.[route.method.toLowerCase()]?.security
        ?.length === 0;
    routes = registeredRoutes(t.gateway.http).filter((route) => route.method !== 'HEAD' && !isPublic(route));
    userToken = (await t.createUser('rhea')).token;
  });
  after(() => t.close());

  /** A concrete path for a route pattern: every parameter a UUID nobody has. */
  const concrete = (url: string) => url.replace(/:[A-Za-z]+/g, '00000000-0000-4000-8000-000000000000');

  for (const [portal, wrong] of [
    ['admin', 'user'],
    ['user', 'admin'],
  ] as const) {
    it(`/v1/${portal}: 401 without a token, 403 with a token of a ${wrong}`, async () => {
      const mine = routes.filter((route) => route.url.startsWith(`/v1/${portal}/`));
      assert.ok(mine.length > (portal === 'admin' ? 30 : 10), `only ${mine.length} ${portal} routes found`);
      const wrongToken = wrong === 'admin' ? t.adminToken : userToken;
      const letThrough: string[] = [];
      for (const route of mine) {
        const path = concrete(route.url);
        const anonymous = await t.request(route.method, path, { token: null, body: {} });
        const other = await t.request(route.method, path, { token: wrongToken, body: {} });
        if (anonymous.status !== 401 || other.status !== 403)
          letThrough.push(
            `${route.method} ${route.url}: ${anonymous.status} anonymous, ${other.status} as ${wrong}`,
          );
      }
      assert.deepEqual(letThrough, []);
    });
  }
});
