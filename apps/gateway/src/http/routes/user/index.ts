import type { Api } from '../../api.js';
import { requireRole } from '../../plugins/authentication.js';
import { documentBearerAuth } from '../../plugins/route-documentation.js';
import type { HttpServices } from '../../services.js';
import { registerCliReleaseRoute } from '../portal/cli-release.js';
import { registerHostDesktopRoutes } from '../portal/host-desktop.js';
import { registerHostExtendRoute } from '../portal/host-extend.js';
import { registerHostShareRoutes } from '../portal/host-shares.js';
import { registerHostTerminalRoutes } from '../portal/host-terminal.js';
import { registerSseRoute } from '../portal/sse.js';
import { registerUserAccountRoutes } from './account.js';
import { registerUserEgressDecisionsRoutes } from './egress-decisions.js';
import { registerUserEgressTrafficRoutes } from './egress-traffic.js';
import { registerUserHostRoutes } from './hosts.js';

/**
 * The user portal, under /v1/user. Its one role check is here: a route placed in this folder is registered
 * behind it and cannot forget it (test: every route of the scope refuses no token and an admin's).
 */
export function userRoutes(user: Api, services: HttpServices): void {
  user.addHook('onRoute', documentBearerAuth);
  user.addHook('onRequest', requireRole(services.auth, 'user'));
  registerUserAccountRoutes(user, services);
  registerUserHostRoutes(user, services);
  registerUserEgressTrafficRoutes(user, services);
  registerUserEgressDecisionsRoutes(user, services);
  registerHostDesktopRoutes(user, services, 'user');
  registerHostExtendRoute(user, services, 'user');
  registerHostTerminalRoutes(user, services, 'user');
  registerHostShareRoutes(user, services, 'user');
  registerCliReleaseRoute(user, services, 'user');
  registerSseRoute(user, services, 'user');
}
