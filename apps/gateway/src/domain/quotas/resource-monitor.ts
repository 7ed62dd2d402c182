import type { ResourceAlert, ResourceAlertKind } from '@ccp/api';
import type { Logger } from 'pino';
import { type EventBus, systemActor } from '../../events/event-bus.js';
import type { ResourceUsage, WorkspaceRuntime } from '../../runtime/workspace-runtime.js';
import { nowIso } from '../../shared/clock.js';
import type { HostsRepository, HostWithOwner } from '../../store/hosts-repository.js';
import { confirmSystem, type SystemGrant } from '../access/grants.js';
import { type AccessSettings, adminHostView } from '../hosts/host-view.js';
import { alertsOf } from './host-resources.js';

/** Share of a limit past which memory is under pressure and a home nearly full. */
export const PRESSURE_SHARE = 0.9;

const MiB = 1024 * 1024;
const percent = (used: number, limit: number) => Math.round((used / limit) * 100);

/** The alerts a sample of a running workspace raises; `oomKillsBefore` is the count the last check saw. */
export function alertsFrom(
  usage: ResourceUsage,
  oomKillsBefore: number,
): { kind: ResourceAlertKind; message: string; used: number; limit: number }[] {
  const out: { kind: ResourceAlertKind; message: string; used: number; limit: number }[] = [];
  const { memory, home } = usage;
  if (memory && Number.isFinite(memory.limitBytes)) {
    if (memory.oomKills > oomKillsBefore)
      out.push({
        kind: 'memory_oom_kill',
        message: `processes were killed for memory: ${memory.oomKills} since the start (limit ${Math.round(memory.limitBytes / MiB)} MiB)`,
        used: memory.workingSetBytes,
        limit: memory.limitBytes,
      });
    if (memory.workingSetBytes >= memory.limitBytes * PRESSURE_SHARE)
      out.push({
        kind: 'memory_pressure',
        message: `memory at ${percent(memory.workingSetBytes, memory.limitBytes)}% of its ${Math.round(memory.limitBytes / MiB)} MiB`,
        used: memory.workingSetBytes,
        limit: memory.limitBytes,
      });
  }
  if (home && home.usedBytes >= home.sizeBytes * PRESSURE_SHARE)
    out.push({
      kind: 'home_nearly_full',
      message: `home at ${percent(home.usedBytes, home.sizeBytes)}% of its ${Math.round(home.sizeBytes / MiB)} MiB`,
      used: home.usedBytes,
      limit: home.sizeBytes,
    });
  return out;
}

/**
 * Looks at this node's running workspaces (RESOURCE_CHECK_SECONDS): memory near its limit, processes killed for
 * memory, a home nearly full. Each alert that begins is an event and shows on the host (`resource_alerts`);
 * memory and home alerts end when the check no longer finds them, an OOM-kill alert when the host stops.
 */
export class ResourceMonitor {
  /** The OOM-kill count each running host had at the last check. */
  private readonly oomKills = new Map<string, number>();
  private checking = false;

  constructor(
    private readonly hosts: HostsRepository,
    private readonly runtime: WorkspaceRuntime,
    private readonly bus: EventBus,
    private readonly access: AccessSettings,
    private readonly log: Logger,
  ) {}

  async check(system: SystemGrant, node: string): Promise<void> {
    confirmSystem(system);
    if (this.checking) return;
    this.checking = true;
    try {
      for (const host of await this.hosts.list({ node })) {
        await this.checkHost(host).catch((error: unknown) =>
          this.log.warn({ err: error, hostId: host.id }, 'resource check failed'),
        );
      }
    } finally {
      this.checking = false;
    }
  }

  private async checkHost(host: HostWithOwner): Promise<void> {
    const before = alertsOf(host);
    if (host.status !== 'running') {
      this.oomKills.delete(host.id);
      if (before.length > 0) await this.store(host, [], true);
      return;
    }
    const usage = await this.runtime.usage(host.id);
    if (!usage) return;
    const found = alertsFrom(usage, this.oomKills.get(host.id) ?? 0);
    if (usage.memory) this.oomKills.set(host.id, usage.memory.oomKills);
    const now = nowIso();
    const kept = before.filter(
      (alert) => alert.kind === 'memory_oom_kill' || found.some((f) => f.kind === alert.kind),
    );
    const begun = found.filter((f) => f.kind === 'memory_oom_kill' || !before.some((a) => a.kind === f.kind));
    const next: ResourceAlert[] = [
      ...kept.filter((alert) => !begun.some((f) => f.kind === alert.kind)),
      ...begun.map((f) => ({ kind: f.kind, message: f.message, since: now })),
    ];
    const ended = before.filter((alert) => !next.some((a) => a.kind === alert.kind));
    if (begun.length === 0 && ended.length === 0) return;
    const view = await this.store(host, next);
    const base = { actor: systemActor, userId: host.user_id, hostId: host.id, host: view };
    for (const alert of begun) {
      const data = { used_bytes: alert.used, limit_bytes: alert.limit };
      const message = `host ${host.short_id}: ${alert.message}`;
      if (alert.kind === 'memory_oom_kill')
        await this.bus.emit({
          ...base,
          type: 'host.memory_oom_kill',
          level: 'warn',
          message,
          data: { ...data, oom_kills: usage.memory?.oomKills ?? 0 },
        });
      else
        await this.bus.emit({
          ...base,
          type: alert.kind === 'memory_pressure' ? 'host.memory_pressure' : 'host.home_nearly_full',
          level: 'warn',
          message,
          data,
        });
    }
    for (const alert of ended)
      await this.bus.emit({
        ...base,
        type: 'host.resource_alert_cleared',
        message: `host ${host.short_id}: ${alert.kind.replaceAll('_', ' ')} is over`,
        data: { kind: alert.kind },
      });
  }

  private async store(host: HostWithOwner, alerts: ResourceAlert[], notify = false) {
    await this.hosts.update(host.id, { resource_alerts: alerts.length > 0 ? JSON.stringify(alerts) : null });
    const view = await adminHostView(this.hosts, (await this.hosts.findById(host.id))!, this.access);
    if (notify) this.bus.notify({ type: 'host.status_changed', host: view });
    return view;
  }
}
