import type { Actor, EventLevel, RecordedEvents } from '@ccp/api';
import type { EventBus } from '../../events/event-bus.js';
import type { UpstreamSpec } from '../../runtime/workspace-runtime.js';
import { nowIso } from '../../shared/clock.js';
import type { HostPatch, HostsRepository, HostWithOwner } from '../../store/hosts-repository.js';
import type { EgressIpsService } from '../egress/egress-ips-service.js';
import { errors } from '../errors.js';
import { type AccessSettings, activeBinding, adminHostView } from './host-view.js';

type StatusEventType = 'host.started' | 'host.stopped' | 'host.rebuilt' | 'host.reconciled' | 'host.failed';

/** An event that comes with a host's status change: the host and its view are filled in by `setStatus`. */
export type StatusEvent = {
  [K in StatusEventType]: { type: K; message: string; level?: EventLevel } & Omit<RecordedEvents[K], 'host'>;
}[StatusEventType];

/** A host's record as the lifecycle reads and writes it: its status (with the event that says so) and its upstream. */
export class HostRecords {
  constructor(
    private readonly hosts: HostsRepository,
    private readonly egressIps: EgressIpsService,
    private readonly bus: EventBus,
    private readonly access: AccessSettings,
  ) {}

  async find(hostId: string): Promise<HostWithOwner | undefined> {
    return this.hosts.findById(hostId);
  }

  async require(hostId: string): Promise<HostWithOwner> {
    const host = await this.hosts.findById(hostId);
    if (!host) throw errors.notFound('Host');
    return host;
  }

  /** The upstream of the host's active binding (the first healthy one), if it has any binding. */
  async activeUpstream(hostId: string): Promise<UpstreamSpec | null> {
    const bindings = (await this.hosts.bindings([hostId])).get(hostId) ?? [];
    const active = activeBinding(bindings);
    if (!active) return null;
    const { row, config } = await this.egressIps.proxyConfig(active.egress_ip_id);
    return { egressIpId: row.id, label: row.label, exitIp: row.ip_address, config };
  }

  async fail(hostId: string, code: string, message: string, actor: Actor): Promise<void> {
    const host = await this.hosts.findById(hostId);
    if (!host) return;
    await this.setStatus(host, { status: 'failed', last_error: `${code}: ${message}` }, actor, {
      type: 'host.failed',
      level: 'error',
      message: `host ${host.short_id} failed: ${message}`,
      data: { code },
    });
  }

  async setStatus(host: HostWithOwner, patch: HostPatch, actor: Actor, event?: StatusEvent): Promise<void> {
    await this.hosts.update(host.id, { ...patch, updated_at: nowIso() });
    const row = (await this.hosts.findById(host.id))!;
    const view = await adminHostView(this.hosts, row, this.access);
    if (event) {
      await this.bus.emit({ ...event, actor, userId: host.user_id, hostId: host.id, host: view });
    } else {
      this.bus.notify({ type: 'host.status_changed', host: view });
    }
  }
}
