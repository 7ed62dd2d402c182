import { isDeepStrictEqual } from 'node:util';
import type { Actor } from '@ccp/api';
import type { EventBus } from '../../events/event-bus.js';
import {
  RuntimeError,
  type UpstreamSpec,
  UpstreamSwitchReverted,
  type WorkspaceRuntime,
} from '../../runtime/workspace-runtime.js';
import type { HostsRepository, HostWithOwner } from '../../store/hosts-repository.js';
import type { HostRecords } from './host-records.js';

/** Points running hosts' egress gateways at their active upstream, and remembers which one each uses. */
export class UpstreamSwitch {
  /**
   * The upstream each running host's egress gateway uses now, as it was when applied (a restarted gateway
   * learns it at the next switch): what a failed switch goes back to.
   */
  readonly inUse = new Map<string, UpstreamSpec>();

  constructor(
    private readonly hosts: HostsRepository,
    private readonly records: HostRecords,
    private readonly runtime: WorkspaceRuntime,
    private readonly bus: EventBus,
  ) {}

  /** Whether what the host runs already leaves the way its active upstream says. */
  async runsActive(hostId: string): Promise<boolean> {
    const runs = this.inUse.get(hostId);
    const wanted = await this.records.activeUpstream(hostId);
    return !runs || !wanted || sameUpstream(wanted, runs);
  }

  /**
   * Applies a local running host's active upstream. When the new path fails its checks, the host goes back to
   * the upstream it had (`previous` when this gateway did not apply it itself), as long as that upstream is
   * still bound to it, and stays running.
   */
  async apply(host: HostWithOwner, actor: Actor, previous?: UpstreamSpec): Promise<void> {
    const hostId = host.id;
    const upstream = await this.records.activeUpstream(hostId);
    if (!upstream) return;
    const fallback = await this.stillBound(hostId, this.inUse.get(hostId) ?? previous);
    try {
      await this.runtime.switchUpstream(hostId, upstream, fallback);
      this.inUse.set(hostId, upstream);
    } catch (error) {
      if (error instanceof UpstreamSwitchReverted && fallback) {
        this.inUse.set(hostId, fallback);
        await this.bus.emit({
          type: 'host.upstream.switch_failed',
          level: 'warn',
          message: `host ${host.short_id} stays on ${fallback.label} (${fallback.exitIp}) as it was: the switch to ${upstream.label} (${upstream.exitIp}) failed (${error.code}: ${error.message})`,
          actor,
          userId: host.user_id,
          hostId,
          data: {
            egress_ip_id: upstream.egressIpId,
            kept_egress_ip_id: fallback.egressIpId,
            code: error.code,
            error: error.message,
          },
        });
        return;
      }
      // Without an upstream to go back to, the runtime leaves the host stopped; the record must say so.
      const code = error instanceof RuntimeError ? error.code : 'internal';
      await this.records.fail(hostId, code, error instanceof Error ? error.message : String(error), actor);
      return;
    }
    await this.bus.emit({
      type: 'host.upstream_switched',
      message: `host ${host.short_id} now leaves through ${upstream.label} (${upstream.exitIp})`,
      actor,
      userId: host.user_id,
      hostId,
      data: { egress_ip_id: upstream.egressIpId },
    });
  }

  /** The upstream, if its egress IP is still bound to the host (an unbound one is never gone back to). */
  private async stillBound(hostId: string, upstream: UpstreamSpec | undefined): Promise<UpstreamSpec | null> {
    if (!upstream) return null;
    const bindings = (await this.hosts.bindings([hostId])).get(hostId) ?? [];
    return bindings.some((binding) => binding.egress_ip_id === upstream.egressIpId) ? upstream : null;
  }
}

/** Whether a host running `a` already leaves the way `b` says (same exit, same config, key order aside). */
function sameUpstream(a: UpstreamSpec, b: UpstreamSpec): boolean {
  return a.exitIp === b.exitIp && isDeepStrictEqual(a.config, b.config);
}
