import { type TaskAccepted as Accepted, TaskAccepted } from '@ccp/api';
import type { FastifyRequest } from 'fastify';
import Type from 'typebox';
import type { Api } from '../../api.js';
import type { ApiTag } from '../../api-tags.js';
import { errorResponses } from '../../schemas.js';

export type HostAction = 'start' | 'stop' | 'rebuild';

/** How the API document names and describes one action of one portal. */
export interface HostActionDoc {
  operationId: string;
  summary: string;
}

const HostParams = Type.Object({ hostID: Type.String({ format: 'uuid' }) });

/**
 * `POST /hosts/{id}/start|stop|rebuild` of one portal: the same lifecycle rules for the admin and the owner
 * (no_egress_bound, host_busy, a start cancelled by a stop); each portal says who may act on which host and where
 * the task is followed.
 */
export function registerHostActions(
  app: Api,
  tags: ApiTag[],
  docs: Record<HostAction, HostActionDoc>,
  run: (action: HostAction, hostId: string, request: FastifyRequest) => Promise<Accepted>,
): void {
  for (const action of ['start', 'stop', 'rebuild'] as const)
    app.post(
      `/hosts/:hostID/${action}`,
      {
        schema: {
          tags,
          ...docs[action],
          params: HostParams,
          response: { 202: TaskAccepted, ...errorResponses(404, 409) },
        },
      },
      async (request, reply) => reply.status(202).send(await run(action, request.params.hostID, request)),
    );
}
