import type { SseMessage } from '@ccp/api';
import type { GatewayEvent } from './internal-events.js';

/** A live message and the one user whose stream also carries it (null: admin streams only). */
export interface LiveMessage {
  message: SseMessage;
  ownerUserId: string | null;
}

const EGRESS_ACTIONS: Partial<Record<GatewayEvent['type'], SseMessage['action']>> = {
  'egress_ip.created': 'create',
  'egress_ip.updated': 'update',
  'egress_ip.deleted': 'delete',
  'egress_ip.test.passed': 'update',
  'egress_ip.test.failed': 'update',
  'egress_ip.test.recovered': 'update',
  'egress_ip.exit_ip.drifted': 'update',
  // A refused update changed nothing a dashboard shows: `egress_ip.update.refused` is not listed.
};

/** A node's state as the dashboard lists it changes with these (admin streams only). */
const NODE_ACTIONS: Partial<Record<GatewayEvent['type'], SseMessage['action']>> = {
  'node.joined': 'update',
  'node.unavailable': 'update',
  'node.returned': 'update',
  'node.rejoined': 'update',
  'node.removed': 'delete',
};

/**
 * What live clients see of an event, or null. Hosts and tasks are visible to their owner's stream as well as to
 * admins; egress IPs and images to admins only.
 */
export function liveMessage(event: GatewayEvent): LiveMessage | null {
  if (event.type === 'host.created') {
    const { host } = event;
    return {
      message: { topic: 'hosts', action: 'create', id: host.id, payload: host },
      ownerUserId: host.user_id,
    };
  }
  if (event.type === 'host.deleted') {
    if (!event.hostId) return null;
    return {
      message: { topic: 'hosts', action: 'delete', id: event.hostId },
      ownerUserId: event.userId ?? null,
    };
  }
  if ('host' in event) {
    const { host } = event;
    return {
      message: { topic: 'hosts', action: 'update', id: host.id, payload: host },
      ownerUserId: host.user_id,
    };
  }
  if ('task' in event) {
    const { task } = event;
    const action = event.type === 'task.queued' ? 'create' : 'update';
    return { message: { topic: 'tasks', action, id: task.id, payload: task }, ownerUserId: task.user_id };
  }
  const nodeAction = NODE_ACTIONS[event.type];
  if (nodeAction && 'data' in event && 'node' in event.data) {
    return { message: { topic: 'nodes', action: nodeAction, id: event.data.node }, ownerUserId: null };
  }
  if (event.type === 'image.checked') {
    return {
      message: { topic: 'image-status', action: 'update', payload: { images: event.images } },
      ownerUserId: null,
    };
  }
  const action = EGRESS_ACTIONS[event.type];
  if (action && 'data' in event && 'egress_ip_id' in event.data) {
    return { message: { topic: 'egress-ips', action, id: event.data.egress_ip_id }, ownerUserId: null };
  }
  return null;
}

/** Where live messages go: the SSE hub itself (SQLite), or the feed shared through PostgreSQL (live-feed.ts). */
export interface LiveSink {
  publish(message: SseMessage, ownerUserId: string | null, userMessage?: SseMessage): void;
}

/** The bus's subscriber that turns events into SSE messages. */
export class SseProjection {
  constructor(
    private readonly sink: LiveSink,
    /** A message as its owner's stream carries it (a host in the user's view); unchanged when absent. */
    private readonly forUsers: (message: SseMessage) => SseMessage = (message) => message,
  ) {}

  project(event: GatewayEvent): void {
    const live = liveMessage(event);
    if (live) this.sink.publish(live.message, live.ownerUserId, this.forUsers(live.message));
  }
}
