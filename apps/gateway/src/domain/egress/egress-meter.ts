import type { Logger } from 'pino';
import type { WorkspaceRuntime } from '../../runtime/workspace-runtime.js';
import { nowIso } from '../../shared/clock.js';
import type { EgressTrafficRepository, TrafficSample } from '../../store/egress-traffic-repository.js';
import type { HostsRepository } from '../../store/hosts-repository.js';
import { activeBinding } from '../hosts/host-view.js';

/** The start of the hour `iso` falls in, as stored (`2026-11-26T18:00:00.000Z`). */
export function hourOf(iso: string): string {
  return `${iso.slice(0, 13)}:00:00.000Z`;
}

/**
 * Moves the bytes each host's egress gateway counted into the hourly figures: per host, its owner and the
 * egress IP that carried them (the active binding now, unless the runtime says they went through another
 * before a switch). The runtime's counters are reset as they are read, so a sample counts every byte once, and
 * a restarted gateway (this process) finds what was counted while it was away.
 */
export class EgressMeter {
  private sampling: Promise<number> | null = null;

  constructor(
    private readonly runtime: WorkspaceRuntime,
    private readonly hosts: HostsRepository,
    private readonly traffic: EgressTrafficRepository,
    private readonly log: Logger,
  ) {}

  /** One round over every host this node's engine holds; returns the bytes recorded. Rounds do not overlap. */
  sample(): Promise<number> {
    this.sampling ??= this.round().finally(() => {
      this.sampling = null;
    });
    return this.sampling;
  }

  private async round(): Promise<number> {
    const hour = hourOf(nowIso());
    let recorded = 0;
    for (const hostId of await this.runtime.hostIds()) {
      const taken = await this.runtime.takeEgressTraffic(hostId).catch((error: unknown) => {
        this.log.warn({ err: error, hostId }, 'reading the egress counters failed');
        return [];
      });
      if (taken.length === 0) continue;
      const host = await this.hosts.findById(hostId);
      const current = activeBinding((await this.hosts.bindings([hostId])).get(hostId) ?? []);
      const samples: TrafficSample[] = [];
      for (const entry of taken) {
        const egressIpId = entry.egressIpId ?? current?.egress_ip_id;
        if (!host || !egressIpId) {
          // A host deleted (or unbound) since: nobody to put the bytes on.
          this.log.warn({ hostId, ...entry }, 'egress bytes of a host without owner or egress IP dropped');
          continue;
        }
        samples.push({
          hour,
          hostId,
          egressIpId,
          userId: host.user_id,
          sent: entry.sent,
          received: entry.received,
        });
        recorded += entry.sent + entry.received;
      }
      await this.traffic.add(samples);
    }
    return recorded;
  }
}
