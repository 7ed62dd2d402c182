import type { LiveEvent, ProxyConfig, RecordedEvent } from '@ccp/api';
import type { RevocationReason } from '../shared/cluster-messages.js';

/** An egress IP's upstream as it was before an update replaced it. */
export interface ReplacedUpstream {
  label: string;
  ipAddress: string;
  config: ProxyConfig;
}

/**
 * Something the container engine did on its own that the event log should show: the shape of the runtime's
 * RuntimeNotice, which the composition root passes on (the bus knows no engine).
 */
export interface EngineNotice {
  hostId: string;
  /** `egress_restarted`: the egress gateway's supervisor restarted v2ray after it died. */
  kind: 'egress_restarted';
  message: string;
}

/** Events only the gateway's own parts react to: never logged, never sent to clients. */
export interface InternalEvents {
  /** Live access of a user ends (sessions, streams), on every gateway sharing the database. */
  'user.access_ended': { userId: string; reason: RevocationReason };
  /** The same revocation, only on the gateway where it was made: effects on shared state run once. */
  'user.access_revoked': { userId: string; reason: RevocationReason };
  /** An egress IP's upstream was replaced; `replaced` is the one running hosts used until now. */
  'egress_ip.upstream_changed': { egressIpId: string; replaced: ReplacedUpstream };
  /** The container engine did something on its own for a host. */
  'runtime.notice': { notice: EngineNotice };
}

export type InternalEvent<K extends keyof InternalEvents = keyof InternalEvents> = {
  [T in K]: { type: T } & InternalEvents[T];
}[K];

export type GatewayEvent = RecordedEvent | LiveEvent | InternalEvent;

/** Recorded events are the ones with an actor: they become event-log rows. */
export function isRecorded(event: GatewayEvent): event is RecordedEvent {
  return 'actor' in event;
}
