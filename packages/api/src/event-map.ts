/*
 * The gateway's events by name. `data` is what the event log stores (secret-looking fields scrubbed); `host` and
 * `task` are the views live clients receive, never logged. A name not listed here does not compile at `emit`.
 */

import type { EgressTestResult } from './egress.js';
import type { EgressBudgetNotice } from './egress-budgets.js';
import type { EffectiveEgressPolicy, EgressPolicy } from './egress-policy.js';
import type { Actor, EventLevel } from './events.js';
import type { Host, ImageStatus, Task } from './hosts.js';
import type { LifecyclePolicy, StopReason } from './lifecycle-policy.js';
import type { HostResources, Quotas, ResourceDefaults } from './resources.js';

type BudgetPassed = Omit<EgressBudgetNotice, 'message' | 'at' | 'state'>;
type Access = { username: string; client_address: string };
/**
 * A login attempt; over SSH also the method (password, publickey). `username` only when it names an account: any
 * other text may be a password typed into the wrong field.
 */
type Attempt = { username: string | null; client_address: string; method?: string };
type Refusal = Attempt & { reason: string };
type HostAccess = { short_id: string; client_address: string };
type SshSession = Access & { short_id: string };
type Traffic = { bytes_in: number; bytes_out: number; duration_ms: number; reason: string };
type Mount = SshSession & { path: string; layout: 'link' | 'directory' };
type DesktopSession = { portal: 'admin' | 'user'; short_id: string; client_address: string };
/** A browser terminal: the tmux session it joined, and how (`attach`, `new`, `take_over`). */
type TerminalSession = DesktopSession & { session: string; mode: string };
/** A shared port of a workspace. */
type PortShareEvent = { share_id: string; short_id: string; port: number; label: string };
type Username = { username: string };
type SshKey = { key_id: string; fingerprint: string; key_type: string };
type EgressIpFields = { egress_ip_id: string; label: string; ip_address: string; type: string };
type EgressTest = { egress_ip_id: string; label: string; result: EgressTestResult };
/** What a resource check measured: bytes used and the limit. */
type ResourceSample = { used_bytes: number; limit_bytes: number };
type Binding = { binding_id: string; egress_ip_id: string };

/** The kinds of tasks: a host's lifecycle, and image builds (on no host). */
export type TaskKind = 'start' | 'bootstrap' | 'stop' | 'rebuild' | 'remove' | 'image-build';

/** Events written to the event log (and published live when they change what a dashboard shows). */
export interface RecordedEvents {
  'auth.login.succeeded': { data: Access };
  'auth.login.failed': { data: Refusal };
  'auth.login.rate_limited': { data: Attempt };
  'auth.entry.succeeded': { data: HostAccess & { outcome: string } };
  'auth.entry.failed': { data: Refusal };
  'auth.entry.rate_limited': { data: Attempt };
  'auth.bootstrap.failed': { data: Refusal };
  'auth.bootstrap.rate_limited': { data: Attempt };
  'auth.ssh.failed': { data: Refusal };
  'auth.ssh.rate_limited': { data: Attempt };
  'bootstrap.session.created': { data: HostAccess };
  'bootstrap.handoff': { data: HostAccess & { expires_at: string } };

  'user.created': { data: Username & { role: string; expires_at: string | null } };
  'user.disabled': { data: Username & { status: string } };
  'user.enabled': { data: Username & { status: string } };
  'user.expiry_changed': { data: Username & { expires_at: string | null } };
  'user.expired': { data: Username & { expires_at: string | null } };
  'user.deleted': { data: Username };
  'user.password_rotated': { data: Username };
  'user.password_changed': Record<never, never>;
  'user.password_change_failed': Record<never, never>;
  'user.ssh_credentials_regenerated': { data: Username };
  'user.ssh_key.added': { data: SshKey };
  'user.ssh_key.generated': { data: SshKey };
  'user.ssh_key.deleted': { data: { key_id: string } };

  'host.created': { data: { short_id: string; egress_ip_id: string | null; node: string }; host: Host };
  'host.deleted': { data: { short_id: string } };
  /** `echoes_out`: the IP echoes (EGRESS_EXIT_IP_URLS) that did not answer when the path was verified. */
  'host.started': { data: { egress_ip_id: string; echoes_out?: string[] }; host: Host };
  'host.stopped': { host: Host };
  'host.rebuilt': { host: Host };
  'host.reconciled': { host: Host };
  'host.failed': { data: { code: string }; host: Host };
  'host.upstream_switched': { data: { egress_ip_id: string } };
  'host.upstream.switch_failed': {
    data: { egress_ip_id: string; kept_egress_ip_id: string; code: string; error: string };
  };
  'host.failover': { data: { from_egress_ip_id: string; to_egress_ip_id: string } };
  'host.egress.restarted': { data: { detail: string } };
  /**
   * What the host's egress policy blocked (or in log-only mode would have) since the last round, summed: one
   * event per host and round, never one per connection. `uncounted`: past the cap on destinations a minute.
   */
  'host.egress_decisions': {
    data: {
      blocked: number;
      would_block: number;
      destinations: number;
      uncounted: number;
      refused_lines: number;
      log_full: boolean;
    };
  };
  'host.resources_changed': {
    /** `home_grows`: `next_start` where a running home could not grow online. */
    data: { before: HostResources; after: HostResources; running: boolean; home_grows: 'now' | 'next_start' };
    host: Host;
  };
  /** The running workspace's memory (without droppable page cache) is near its limit. */
  'host.memory_pressure': { data: ResourceSample; host: Host };
  /** The kernel killed processes of the workspace for memory; `oom_kills` counts since its start. */
  'host.memory_oom_kill': { data: ResourceSample & { oom_kills: number }; host: Host };
  'host.home_nearly_full': { data: ResourceSample; host: Host };
  /** A memory or home alert of a running host ended. */
  'host.resource_alert_cleared': { data: { kind: string }; host: Host };
  'user.resources_changed': { data: Username & { defaults: ResourceDefaults; quotas: Quotas } };
  'quota.exceeded': {
    data: Username & { quota: string; limit: number; used: number; requested: number };
  };
  'host.node_unavailable': { data: { node: string }; host: Host };
  'host.node_returned': { data: { node: string }; host: Host };
  'node.joined': { data: { node: string; internal_address: string | null } };
  'node.unavailable': { data: { node: string; last_heartbeat_at: string; stopped: boolean; hosts: number } };
  'node.returned': { data: { node: string; hosts: number } };
  'node.removed': { data: { node: string; hosts: number; tasks_failed: number } };
  'node.rejoined': { data: { node: string } };
  'host.moved': { data: { from_node: string; to_node: string }; host: Host };
  'host.stale_workspace_stopped': { data: { node: string; placed_on: string } };
  'host.policy_changed': { data: { policy: LifecyclePolicy }; host: Host };
  'user.host_policy_changed': { data: Username & { policy: LifecyclePolicy } };
  /** A host's own egress policy was set (`policy`) or removed (null); `effective` is what it follows now. */
  'host.egress_policy_changed': {
    data: { policy: EgressPolicy | null; effective: EffectiveEgressPolicy };
    host: Host;
  };
  'user.egress_policy_changed': { data: Username & { policy: EgressPolicy | null } };
  /** A running host's egress gateway follows its policy now, `duration_ms` after it was asked to. */
  'host.egress_policy_applied': {
    data: {
      mode: EffectiveEgressPolicy['mode'];
      source: EffectiveEgressPolicy['source'];
      duration_ms: number;
    };
  };
  'host.egress_policy_apply_failed': { data: { code: string; error: string } };
  /**
   * Users were told the policy stops the host at `stop_at`: `terminals_told` SSH terminals at the host's node got
   * the line (the other gateways write it to theirs).
   */
  'host.stop_warning': { data: { reason: StopReason; stop_at: string; terminals_told: number }; host: Host };
  'host.stop_extended': { data: { until: string }; host: Host };
  /** The policy queued an ordinary stop task. */
  'host.policy_stop': { data: { reason: StopReason; task_id: string; last_activity_at: string | null } };
  /** A budget the host counts against passed its warning share (`reached`: its limit); users were told. */
  'host.egress_budget_warning': { data: BudgetPassed & { terminals_told: number }; host: Host };
  'host.egress_budget_reached': { data: BudgetPassed & { terminals_told: number }; host: Host };
  'host.egress_throttled': { data: { bytes_per_second: number }; host: Host };
  'host.egress_throttle_lifted': { data: { bytes_per_second: number }; host: Host };
  /** Its upstream failed or its exit drifted: the workspace's processes are frozen until the exit is verified. */
  'host.paused': {
    data: { reason: string; egress_ip_id: string | null; terminals_told: number };
    host: Host;
  };
  'host.resumed': { data: { paused_since: string }; host: Host };
  'host.scheduled_start': { data: { task_id: string } };
  'host.scheduled_start_failed': { data: { code: string; error: string } };
  'binding.created': { data: Binding; host: Host };
  'binding.deleted': { data: Binding; host: Host };
  'task.interrupted': { task: Task };
  'task.start.succeeded': { task: Task };
  'task.start.failed': { data: { code: string }; task: Task };
  'task.start.cancelled': { data: { code: 'cancelled' }; task: Task };
  'task.bootstrap.succeeded': { task: Task };
  'task.bootstrap.failed': { data: { code: string }; task: Task };
  'task.bootstrap.cancelled': { data: { code: 'cancelled' }; task: Task };
  'task.stop.succeeded': { task: Task };
  'task.stop.failed': { data: { code: string }; task: Task };
  'task.stop.cancelled': { data: { code: 'cancelled' }; task: Task };
  'task.rebuild.succeeded': { task: Task };
  'task.rebuild.failed': { data: { code: string }; task: Task };
  'task.rebuild.cancelled': { data: { code: 'cancelled' }; task: Task };
  'task.remove.succeeded': { task: Task };
  'task.remove.failed': { data: { code: string }; task: Task };
  'task.remove.cancelled': { data: { code: 'cancelled' }; task: Task };
  'task.image-build.succeeded': { task: Task };
  'task.image-build.failed': { data: { code: string }; task: Task };
  'task.image-build.cancelled': { data: { code: 'cancelled' }; task: Task };

  'egress_ip.created': { data: EgressIpFields };
  'egress_ip.updated': { data: EgressIpFields & { upstream_changed: boolean } };
  'egress_ip.deleted': { data: { egress_ip_id: string; label: string } };
  'egress_ip.test.passed': { data: EgressTest };
  'egress_ip.test.failed': { data: EgressTest };
  'egress_ip.test.recovered': { data: EgressTest };
  'egress_ip.exit_ip.drifted': { data: EgressTest };
  'egress_ip.update.refused': { data: EgressTest & { host_ids: string[] } };
  'image.ready': { data: { images: Pick<ImageStatus, 'name' | 'tag' | 'present'>[] } };
  'image.missing': { data: { images: Pick<ImageStatus, 'name' | 'tag' | 'present'>[] } };

  'ssh.session.opened': { data: SshSession };
  'ssh.session.closed': { data: SshSession & Traffic };
  'ssh.mount.opened': { data: Mount };
  'ssh.mount.closed': { data: Mount & { duration_ms: number } };
  'ssh.mount.failed': {
    data: SshSession & { path: string | null; layout: 'link' | 'directory' | null; reason: string };
  };
  'vnc.session.opened': { data: DesktopSession & { desktop_locked: boolean } };
  'vnc.session.closed': { data: DesktopSession & Traffic };
  'terminal.session.opened': { data: TerminalSession };
  'terminal.session.closed': { data: TerminalSession & Traffic };
  'port_share.created': { data: PortShareEvent & { usernames: string[]; link: boolean } };
  'port_share.revoked': { data: PortShareEvent };
  'port_share.opened': { data: PortShareEvent & { via: 'ticket' | 'link'; client_address: string } };
  'port_share.closed': { data: PortShareEvent & Traffic };
  'vnc.started': { data: { short_id: string; duration_ms: number } };
  'vnc.restarted': { data: { short_id: string; duration_ms: number } };
  'vnc.start.failed': { data: { short_id: string; code: string; reason: string } };
  'vnc.restart.failed': { data: { short_id: string; code: string; reason: string } };
}

/** Notices for live clients only: never logged, as progress ticks would flood the log. */
export interface LiveEvents {
  'task.queued': { task: Task };
  'task.progressed': { task: Task };
  'host.status_changed': { host: Host };
  'image.checked': { images: ImageStatus[] };
}

/** What every recorded event carries besides its own fields: the columns of its event-log row. */
export interface EventEnvelope {
  level?: EventLevel;
  message: string;
  actor: Actor;
  userId?: string | null;
  hostId?: string | null;
  taskId?: string | null;
}

export type RecordedEventType = keyof RecordedEvents;
export type RecordedEvent<K extends RecordedEventType = RecordedEventType> = {
  [T in K]: { type: T } & EventEnvelope & RecordedEvents[T];
}[K];
export type LiveEvent<K extends keyof LiveEvents = keyof LiveEvents> = {
  [T in K]: { type: T } & LiveEvents[T];
}[K];
