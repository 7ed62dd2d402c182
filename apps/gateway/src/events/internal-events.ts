import type { LiveEvent, RecordedEvent } from '@ccp/api';
import type { RevocationReason } from '../domain/access-revocation.js';
import type { ReplacedUpstream } from '../domain/egress-ips-service.js';
import type { RuntimeNotice } from '../runtime/workspace-runtime.js';

/** Events only the gateway's own parts react to: never logged, never sent to clients. */
export interface InternalEvents {
  /** Live access of a user ends (sessions, streams), on every gateway sharing the database. */
  'user.access_ended': { userId: string; reason: RevocationReason };
  /** The same revocation, only on the gateway where it was made: effects on shared state run once. */
  'user.access_revoked': { userId: string; reason: RevocationReason };
  /** An egress IP's upstream was replaced; `replaced` is the one running hosts used until now. */
  'egress_ip.upstream_changed': { egressIpId: string; replaced: ReplacedUpstream };
  /** The container engine did something on its own for a host. */
  'runtime.notice': { notice: RuntimeNotice };
}

export type InternalEvent<K extends keyof InternalEvents = keyof InternalEvents> = {
  [T in K]: { type: T } & InternalEvents[T];
}[K];

export type GatewayEvent = RecordedEvent | LiveEvent | InternalEvent;

/** Recorded events are the ones with an actor: they become event-log rows. */
export function isRecorded(event: GatewayEvent): event is RecordedEvent {
  return 'actor' in event;
}
