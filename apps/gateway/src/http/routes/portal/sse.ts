import { ADMIN_TOPICS, type Role, SseQuery, SseStream, type SseTopic, USER_TOPICS } from '@ccp/api';
import { errors } from '../../../domain/errors.js';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { principalOf, tokenOf } from '../../plugins/authentication.js';
import { errorResponses } from '../../schemas.js';
import type { HttpServices } from '../../services.js';

function parseTopics(raw: string | undefined, role: Role): Set<SseTopic> {
  const allowed: readonly SseTopic[] = role === 'admin' ? ADMIN_TOPICS : USER_TOPICS;
  if (raw === undefined || raw.trim() === '') return new Set(allowed);
  const topics = new Set<SseTopic>();
  for (const name of raw
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean)) {
    if (!allowed.includes(name as SseTopic)) {
      throw errors.validation(
        [{ field: 'topics', message: `unknown topic "${name}"; allowed: ${allowed.join(', ')}` }],
        `Unknown topic "${name}"`,
      );
    }
    topics.add(name as SseTopic);
  }
  return topics;
}

/** `GET /sse` inside the admin or user scope: the live event stream for that role. */
export function registerSseRoute(app: Api, { sse, auth }: HttpServices, role: Role): void {
  app.get(
    '/sse',
    {
      config: { tokenInQuery: true },
      schema: {
        tags: [role === 'admin' ? 'admin: events' : 'user portal'] satisfies ApiTag[],
        operationId: role === 'admin' ? 'streamEvents' : 'streamOwnEvents',
        summary: 'Server-sent events: `event: message` frames whose data is {topic, action, id?, payload?}',
        querystring: SseQuery,
        response: {
          200: {
            description: 'The live event stream',
            content: { 'text/event-stream': { schema: SseStream } },
          },
          ...errorResponses(400, 401, 403),
        },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      const topics = parseTopics(request.query.topics, role);
      const header = request.headers['last-event-id'];
      const lastEventId = typeof header === 'string' && /^\d+$/.test(header) ? Number(header) : null;
      // The stream lives no longer than the token that opened it, nor past the rights it was opened with.
      const { tokenVersion, expiresAt } = await auth.streamHolder(tokenOf(request) ?? '');
      reply.hijack();
      sse.attach(reply.raw, { role, userId: principal.id, topics, tokenVersion, expiresAt }, lastEventId);
    },
  );
}
