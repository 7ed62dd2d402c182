import type { Logger } from 'pino';
import { type EventBus, systemActor } from '../../events/event-bus.js';
import type { WorkspaceRuntime } from '../../runtime/workspace-runtime.js';
import type { EgressDecisionsRepository } from '../../store/egress-decisions-repository.js';
import type { HostsRepository } from '../../store/hosts-repository.js';

/**
 * Moves what each host's egress policy blocked (or in log-only mode would have blocked) from its egress
 * gateway's log into the per-minute counts, in rounds: one event per host and round sums them up, so a
 * workspace retrying a blocked name a thousand times makes one line in the event log, not a thousand. Past
 * `cap` distinct destinations in a minute a host's decisions are only summed (as uncounted), which bounds the
 * rows a workspace can make by connecting to made-up names.
 */
export class EgressDecisionLog {
  private reading: Promise<number> | null = null;

  constructor(
    private readonly runtime: WorkspaceRuntime,
    private readonly hosts: HostsRepository,
    private readonly decisions: EgressDecisionsRepository,
    private readonly bus: EventBus,
    private readonly cap: number,
    private readonly log: Logger,
  ) {}

  /** One round over every host this node's engine holds; returns the decisions read. Rounds do not overlap. */
  read(): Promise<number> {
    this.reading ??= this.round().finally(() => {
      this.reading = null;
    });
    return this.reading;
  }

  private async round(): Promise<number> {
    let total = 0;
    for (const hostId of await this.runtime.hostIds()) {
      const read = await this.runtime.takeEgressDecisions(hostId).catch((error: unknown) => {
        this.log.warn({ err: error, hostId }, "reading the egress policy's log failed");
        return null;
      });
      if (!read || (read.counts.length === 0 && read.refused === 0 && !read.overflowed)) continue;
      const host = await this.hosts.findById(hostId);
      if (!host) {
        this.log.warn({ hostId }, 'egress policy decisions of a deleted host dropped');
        continue;
      }
      const added = await this.decisions.add(hostId, host.user_id, read.counts, this.cap);
      const sum = (decision: string) =>
        read.counts
          .filter((count) => count.decision === decision)
          .reduce((all, count) => all + count.count, 0);
      const blocked = sum('blocked');
      const wouldBlock = sum('would_block');
      total += blocked + wouldBlock;
      const destinations = new Set(read.counts.map((count) => `${count.destination}:${count.port}`)).size;
      const notes = [
        ...(added.uncounted > 0
          ? [
              `${added.uncounted} to ${added.uncountedDestinations} more destinations uncounted past ${this.cap} a minute`,
            ]
          : []),
        ...(read.overflowed ? ['the log was full, so some went unseen'] : []),
        ...(read.refused > 0 ? [`${read.refused} log lines with no valid destination ignored`] : []),
      ];
      const what = [
        ...(blocked > 0 ? [`blocked ${blocked}`] : []),
        ...(wouldBlock > 0 ? [`would have blocked ${wouldBlock}`] : []),
      ];
      await this.bus.emit({
        type: 'host.egress_decisions',
        level: added.uncounted > 0 || read.overflowed ? 'warn' : 'info',
        actor: systemActor,
        userId: host.user_id,
        hostId,
        message: `host ${host.short_id}: the egress policy ${what.join(' and ') || 'decided nothing readable'} connection${blocked + wouldBlock === 1 ? '' : 's'} to ${destinations} destination${destinations === 1 ? '' : 's'}${notes.length > 0 ? ` (${notes.join('; ')})` : ''}`,
        data: {
          blocked,
          would_block: wouldBlock,
          destinations,
          uncounted: added.uncounted,
          refused_lines: read.refused,
          log_full: read.overflowed,
        },
      });
    }
    return total;
  }
}
