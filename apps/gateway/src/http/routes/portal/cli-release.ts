import { CliRelease } from '@ccp/api';
import type { Api } from '../../api.js';
import { errorResponses } from '../../schemas.js';
import type { HttpServices } from '../../services.js';

/**
 * The bundle's checksum for a signed-in user or admin, inside the portal's scope (its role check applies): what
 * the dashboard shows beside the install line, to compare with what the install script printed.
 */
export function registerCliReleaseRoute(app: Api, { cli }: HttpServices, portal: 'admin' | 'user'): void {
  app.get(
    '/cli',
    {
      schema: {
        tags: [portal === 'admin' ? 'admin: hosts' : 'user portal'],
        operationId: portal === 'admin' ? 'getCliRelease' : 'getPortalCliRelease',
        summary:
          "The ccp bundle's SHA-256 checksum, and whether its download is protected (TLS, or this machine only)",
        response: { 200: CliRelease, ...errorResponses(404) },
      },
    },
    async () => cli.release(),
  );
}
