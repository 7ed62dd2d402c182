import { CliBundleBody, CliChecksum, CliInstaller } from '@ccp/api';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { errorResponses, textResponse } from '../../schemas.js';
import type { HttpServices } from '../../services.js';

const tags: ApiTag[] = ['access'];

/** The users' CLI, for anyone: it holds no secret, and getting it should take one line (docs/cli.md). */
export function registerCliDownloadRoutes(app: Api, { cli }: HttpServices): void {
  app.get(
    '/v1/cli/ccp.mjs',
    {
      schema: {
        tags,
        operationId: 'downloadCli',
        summary: 'The ccp command-line client, one file',
        response: { 200: textResponse('text/javascript', 'The CLI', CliBundleBody), ...errorResponses(404) },
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
        tags,
        operationId: 'getCliChecksum',
        summary: "The bundle's SHA-256 checksum",
        response: {
          200: textResponse('text/plain', 'The checksum line', CliChecksum),
          ...errorResponses(404),
        },
      },
    },
    async (_request, reply) => reply.type('text/plain; charset=utf-8').send(await cli.checksumLine()),
  );
  app.get(
    '/v1/cli/install',
    {
      schema: {
        tags,
        operationId: 'getCliInstaller',
        summary:
          'Installs ccp in ~/.local/bin after checking its checksum: curl -fsSL <api>/v1/cli/install | sh',
        response: {
          200: textResponse('text/x-shellscript', 'The installer', CliInstaller),
          ...errorResponses(404),
        },
      },
    },
    async (_request, reply) =>
      reply
        .type('text/x-shellscript; charset=utf-8')
        .header('cache-control', 'no-store')
        .send(await cli.installer()),
  );
}
