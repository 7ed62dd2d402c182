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
import { registerAdminActivityRoutes } from './activity.js';
import { registerAdminEgressBudgetRoutes } from './egress-budgets.js';
import { registerAdminEgressDecisionsRoutes } from './egress-decisions.js';
import { registerAdminEgressRoutes } from './egress-ips.js';
import { registerAdminEgressPolicyRoutes } from './egress-policies.js';
import { registerAdminEgressTrafficRoutes } from './egress-traffic.js';
import { registerAdminHostRoutes } from './hosts.js';
import { registerAdminLifecyclePolicyRoutes } from './lifecycle-policies.js';
import { registerAdminUserRoutes } from './users.js';

/**
 * The admin portal, under /v1/admin. Its one role check is here: a route placed in this folder is registered
 * behind it and cannot forget it (test: every route of the scope refuses no token and a user's).
 */
export function adminRoutes(admin: Api, services: HttpServices): void {
  admin.addHook('onRoute', documentBearerAuth);
  admin.addHook('onRequest', requireRole(services.auth, 'admin'));
  registerAdminUserRoutes(admin, services);
  registerAdminEgressRoutes(admin, services);
  registerAdminEgressTrafficRoutes(admin, services);
  registerAdminEgressBudgetRoutes(admin, services);
  registerAdminEgressDecisionsRoutes(admin, services);
  registerAdminHostRoutes(admin, services);
  registerHostDesktopRoutes(admin, services, 'admin');
  registerHostExtendRoute(admin, services, 'admin');
  registerAdminLifecyclePolicyRoutes(admin, services);
  registerAdminEgressPolicyRoutes(admin, services);
  registerHostTerminalRoutes(admin, services, 'admin');
  registerHostShareRoutes(admin, services, 'admin');
  registerAdminActivityRoutes(admin, services);
  registerCliReleaseRoute(admin, services, 'admin');
  registerSseRoute(admin, services, 'admin');
}
