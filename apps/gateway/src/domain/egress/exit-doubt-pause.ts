import type { EgressTestResult } from '@ccp/api';
import type { Logger } from 'pino';
import type { EventBus } from '../../events/event-bus.js';
import { systemActor } from '../../events/event-bus.js';
import type { WorkspaceRuntime } from '../../runtime/workspace-runtime.js';
import { nowIso } from '../../shared/clock.js';
import type { EgressIpsRepository } from '../../store/egress-ips-repository.js';
import type { HostsRepository, HostWithOwner } from '../../store/hosts-repository.js';
import { type AccessSettings, activeBinding, adminHostView } from '../hosts/host-view.js';
import { failedChecks } from './egress-ips-service.js';

export interface ExitDoubtPauseOptions {
  hosts: HostsRepository;
  egressIps: Pick<EgressIpsRepository, 'findById'>;
  runtime: Pick<WorkspaceRuntime, 'freeze'>;
  bus: EventBus;
  /** Writes a line to the host's attached SSH terminals and tmux clients; answers how many SSH terminals. */
  tell: (hostId: string, text: string) => Promise<number>;
  accessSettings: AccessSettings;
  /** This gateway's node: it freezes only the workspaces its engine runs. */
  node: string;
  /** EGRESS_PAUSE_WHEN_IN_DOUBT; off, workspaces frozen before are thawed. */
  enabled: boolean;
  log: Logger;
}

/** Why a host's exit is in doubt, from its egress IP's last test. */
export function doubtOf(label: string, result: EgressTestResult | null): string {
  const exit = result?.checks.exit_ip;
  if (exit && exit.observed !== null && exit.observed !== exit.expected)
    return `its exit drifted: ${label} should leave from ${exit.expected} but was seen leaving from ${exit.observed}`;
  const failed = result ? failedChecks(result).join('; ') : '';
  return `its upstream ${label} failed its checks${failed ? ` (${failed})` : ''}`;
}

/**
 * Freezes the workspaces whose exit is in doubt, after each egress health round (EGRESS_PAUSE_WHEN_IN_DOUBT):
 * a running host left with no healthy binding (its upstream failed, or its exit drifted from the declared one)
 * has its processes frozen, so an agent stops spending retries and tokens on a path nobody trusts; attached
 * terminals are told first. A later round that verifies the exit again thaws them; sessions stay open all along.
 */
export class ExitDoubtPause {
  constructor(private readonly options: ExitDoubtPauseOptions) {}

  /** A start begins unfrozen: what a stop left recorded is forgotten. */
  follow(): void {
    this.options.bus.on('host.started', async ({ hostId }) => {
      if (hostId) await this.options.hosts.update(hostId, { paused_reason: null, paused_at: null });
    });
  }

  async round(): Promise<void> {
    const { hosts, node, log } = this.options;
    const here = await hosts.list({ node });
    const bindings = await hosts.bindings(here.map((host) => host.id));
    for (const host of here) {
      try {
        if (host.status !== 'running') {
          if (host.paused_reason) await hosts.update(host.id, { paused_reason: null, paused_at: null });
          continue;
        }
        const active = activeBinding(bindings.get(host.id) ?? []);
        const doubt = this.options.enabled && active && !active.healthy ? await this.reason(active) : null;
        if (doubt && !host.paused_reason) await this.pause(host, doubt, active!.egress_ip_id);
        else if (!doubt && host.paused_reason) await this.resume(host);
      } catch (error) {
        log.warn({ err: error, hostId: host.id }, 'pausing or resuming a host whose exit is in doubt failed');
      }
    }
  }

  private async reason(binding: { egress_ip_id: string; label: string }): Promise<string> {
    const row = await this.options.egressIps.findById(binding.egress_ip_id);
    const result = row?.last_test ? (JSON.parse(row.last_test) as EgressTestResult) : null;
    return doubtOf(binding.label, result);
  }

  private async pause(host: HostWithOwner, reason: string, egressIpId: string): Promise<void> {
    const { runtime, hosts, bus, tell } = this.options;
    const text =
      `host ${host.short_id} is paused: ${reason}. Its processes are frozen until the exit is verified ` +
      'again; this session stays open and resumes then';
    // Told before the freeze: a frozen terminal would print it only once thawed.
    const told = await tell(host.id, text);
    if (!(await runtime.freeze(host.id, true))) return;
    await hosts.update(host.id, { paused_reason: reason, paused_at: nowIso() });
    await bus.emit({
      type: 'host.paused',
      level: 'warn',
      message: text,
      actor: systemActor,
      userId: host.user_id,
      hostId: host.id,
      data: { reason, egress_ip_id: egressIpId, terminals_told: told },
      host: await this.view(host.id),
    });
  }

  private async resume(host: HostWithOwner): Promise<void> {
    const { runtime, hosts, bus, tell } = this.options;
    await runtime.freeze(host.id, false);
    await hosts.update(host.id, { paused_reason: null, paused_at: null });
    const text = `host ${host.short_id} resumed: its exit is verified again`;
    await tell(host.id, text);
    await bus.emit({
      type: 'host.resumed',
      message: text,
      actor: systemActor,
      userId: host.user_id,
      hostId: host.id,
      data: { paused_since: host.paused_at ?? nowIso() },
      host: await this.view(host.id),
    });
  }

  private async view(hostId: string) {
    const row = await this.options.hosts.findById(hostId);
    if (!row) throw new Error(`host ${hostId} is gone`);
    return adminHostView(this.options.hosts, row, this.options.accessSettings);
  }
}
