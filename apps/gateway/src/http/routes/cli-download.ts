import { CliBundleBody, CliChecksum, CliInstaller } from '@ccp/api';
import type { Api } from '../api.js';
import { errorResponses } from '../schemas.js';
import type { HttpServices } from '../services.js';

/** The users' CLI, for anyone: it holds no secret, and getting it should take one line (docs/cli.md). */
export function registerCliDownloadRoutes(app: Api, { cli }: HttpServices): void {
  app.get(
    '/v1/cli/ccp.mjs',
    {
      schema: {
        tags: ['access'],
        summary: 'The ccp command-line client, one file',
        response: { 200: CliBundleBody, ...errorResponses(404) },
      },
    },
    async (_request, reply) => {
      const { text, sha256 } = await cli.file();
      return reply
        .type('text/javascript; charset=utf-8')
        .header('x-checksum-sha256', sha256)
        .header('etag', `"${sha256}"`)
        .header('content-disposition', 'attachment; filename="ccp.mjs"')
        .send(text);
    },
  );
  app.get(
    '/v1/cli/ccp.mjs.sha256',
    {
      schema: {
        tags: ['access'],
        summary: "The bundle's SHA-256 checksum",
        response: { 200: CliChecksum, ...errorResponses(404) },
      },
    },
    async (_request, reply) => reply.type('text/plain; charset=utf-8').send(await cli.checksumLine()),
  );
  app.get(
    '/v1/cli/install',
    {
      schema: {
        tags: ['access'],
        summary:
          'Installs ccp in ~/.local/bin after checking its checksum: curl -fsSL <api>/v1/cli/install | sh',
        response: { 200: CliInstaller, ...errorResponses(404) },
      },
    },
    async (_request, reply) =>
      reply
        .type('text/x-shellscript; charset=utf-8')
        .header('cache-control', 'no-store')
        .send(await cli.installer()),
  );
}
