import type { Api } from '../../api.js';
import { documentNoAuth } from '../../plugins/route-documentation.js';
import type { HttpServices } from '../../services.js';
import { registerAccessRoutes } from './access.js';
import { registerCliDownloadRoutes } from './cli-download.js';
import { registerPublicRoutes } from './status.js';

/** What anyone may ask, without a token: health, login, the entry and bootstrap API, ccp's download. */
export function publicRoutes(open: Api, services: HttpServices): void {
  open.addHook('onRoute', documentNoAuth);
  registerPublicRoutes(open, services);
  registerAccessRoutes(open, services);
  registerCliDownloadRoutes(open, services);
}
