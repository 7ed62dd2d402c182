import type { Generated } from 'kysely';

/** Timestamps are stored as fixed-width RFC 3339 UTC text (`2026-01-02T03:04:05.678Z`) on both databases,
 * so they sort and compare the same way as text in SQLite and PostgreSQL. */
export type IsoTime = string;

export interface UsersTable {
  id: string;
  username: string;
  username_key: string;
  role: 'admin' | 'user';
  status: 'active' | 'disabled';
  password_hash: string;
  token_version: number;
  expires_at: IsoTime | null;
  expiry_handled_at: IsoTime | null;
  /** The defaults of the user's hosts' lifecycle policy (null: the gateway's). */
  idle_timeout_seconds: number | null;
  max_lifetime_seconds: number | null;
  /** JSON of a WeeklySchedule. */
  schedule: string | null;
  short_id: string;
  ssh_user: string;
  ssh_pass_sealed: string;
  created_at: IsoTime;
  updated_at: IsoTime;
  /** Resources of the user's hosts that set none of their own; null: the gateway's setting. */
  default_cpus: number | null;
  default_memory_mb: number | null;
  default_pids: number | null;
  default_home_mb: number | null;
  /** Quotas; null: unlimited. */
  quota_hosts: number | null;
  quota_running_hosts: number | null;
  quota_cpus: number | null;
  quota_memory_mb: number | null;
  quota_home_mb: number | null;
  /** JSON of an EgressPolicy: the default of the user's hosts (null: the gateway's). */
  egress_policy: string | null;
}

export interface SshKeysTable {
  id: string;
  user_id: string;
  label: string;
  public_key: string;
  fingerprint: string;
  key_type: string;
  created_at: IsoTime;
}

export interface EventsTable {
  id: string;
  seq: Generated<number>;
  type: string;
  level: 'info' | 'warn' | 'error';
  message: string;
  actor_kind: 'admin' | 'user' | 'system' | 'anonymous';
  actor_id: string | null;
  actor_username: string | null;
  user_id: string | null;
  host_id: string | null;
  task_id: string | null;
  data: string;
  created_at: IsoTime;
}

export interface EgressIpsTable {
  id: string;
  label: string;
  ip_address: string;
  tunnel_type: string;
  provider: string;
  proxy_config_sealed: string;
  last_test: string | null;
  last_test_ok: number | null;
  created_at: IsoTime;
  updated_at: IsoTime;
}

export interface HostsTable {
  id: string;
  short_id: string;
  user_id: string;
  status: string;
  image: string | null;
  last_error: string | null;
  created_at: IsoTime;
  updated_at: IsoTime;
  started_at: IsoTime | null;
  gateway_key_sealed: string | null;
  gateway_public_key: string | null;
  /** The node whose engine holds the host's containers and home; null only before its first placement. */
  node: string | null;
  status_before_node_loss: string | null;
  /** The host's own resources; null: its owner's default, else the gateway's. */
  cpus: number | null;
  memory_mb: number | null;
  pids: number | null;
  home_mb: number | null;
  /** JSON array of ResourceAlert: what the last check of the running host found short; null: none. */
  resource_alerts: string | null;
  /** The host's own lifecycle policy (null: its owner's defaults). */
  idle_timeout_seconds: number | null;
  max_lifetime_seconds: number | null;
  /** JSON of a WeeklySchedule. */
  schedule: string | null;
  last_activity_at: IsoTime | null;
  /** session, terminal, cpu or network. */
  last_activity_signal: string | null;
  /** Until when an extend holds off the policy's stops. */
  stop_extended_until: IsoTime | null;
  planned_stop_at: IsoTime | null;
  /** idle, lifetime or schedule. */
  planned_stop_reason: string | null;
  /** When users were told of the planned stop; cleared when the plan moves out of the warning time. */
  stop_warned_at: IsoTime | null;
  planned_start_at: IsoTime | null;
  /** Why the policy stopped the host last; cleared when it starts. */
  policy_stop_reason: string | null;
  /** The rate (each way) a reached egress budget holds the host to; null: not throttled (migration 0014). */
  egress_throttle_bytes_per_second: number | string | null;
  /** JSON of the budget warning or limit its users were told of last (HostEgressState's `budget`). */
  egress_budget_notice: string | null;
  /** Why its workspace is frozen while its exit is in doubt, and since when; null: not paused. */
  paused_reason: string | null;
  paused_at: string | null;
  /** JSON of an EgressPolicy: the host's own (null: its owner's default). */
  egress_policy: string | null;
}

export interface BindingsTable {
  id: string;
  host_id: string;
  egress_ip_id: string;
  created_at: IsoTime;
}

export interface TasksTable {
  id: string;
  kind: string;
  host_id: string | null;
  user_id: string | null;
  status: 'pending' | 'running' | 'succeeded' | 'failed';
  progress: number;
  stage: string;
  message: string;
  error_code: string | null;
  error_message: string | null;
  requested_by: string;
  created_at: IsoTime;
  started_at: IsoTime | null;
  finished_at: IsoTime | null;
  /** The node that runs it: the host's node, or the gateway that took an image build. */
  node: string | null;
  /** Set when that node took the task from the queue. */
  claimed_at: IsoTime | null;
  /** Set by whoever asked to cancel it, from any gateway; the running node aborts it. */
  cancel_reason: string | null;
  /** JSON: the requester (for the events the running node writes) and the task's options. */
  request: string | null;
}

/** A one-time ticket: only the digest of its secret, what it grants (JSON, `granted`) and until when. */
export interface AccessTicketsTable {
  digest: string;
  /** Tickets of one kind never open another (`ssh`, `desktop`). */
  kind: string;
  granted: string;
  expires_at: IsoTime;
}

/** One failed secret against one rate-limit key, at a time in milliseconds. */
export interface AuthFailuresTable {
  key: string;
  at_ms: number | string;
}

/** A gateway process sharing the database: where its internal channel listens, what it holds, when it last
 * said it was alive. */
export interface NodesTable {
  name: string;
  /** The process that holds the name now: a second process with the same name is refused while this one lives. */
  instance_id: string;
  /** host:port of the internal channel other nodes dial; null when the node takes no relayed sessions. */
  internal_address: string | null;
  memory_mb: number;
  cpus: number;
  max_hosts: number;
  images_ready: number;
  started_at: IsoTime;
  heartbeat_at: IsoTime;
  /** Set by a gateway that stopped on purpose: silent from then on, without waiting NODE_DEAD_SECONDS. */
  left_at: IsoTime | null;
  /** 1 once one gateway logged this node's silence (each silence is logged once); a heartbeat clears it. */
  silence_reported: number;
}

/** A live (SSE) message, numbered by the database so every gateway gives it the same id. */
export interface LiveMessagesTable {
  /** bigserial: a string from PostgreSQL. */
  seq: Generated<number | string>;
  owner_user_id: string | null;
  message: string;
  /** The owner's view, when it differs from the admins'. */
  user_message: string | null;
  created_at: IsoTime;
}

export interface DatabaseSchema {
  users: UsersTable;
  ssh_keys: SshKeysTable;
  events: EventsTable;
  egress_ips: EgressIpsTable;
  hosts: HostsTable;
  bindings: BindingsTable;
  tasks: TasksTable;
  access_tickets: AccessTicketsTable;
  auth_failures: AuthFailuresTable;
  nodes: NodesTable;
  live_messages: LiveMessagesTable;
  egress_traffic: EgressTrafficTable;
  egress_budgets: EgressBudgetsTable;
  egress_budget_marks: EgressBudgetMarksTable;
  egress_decisions: EgressDecisionsTable;
  egress_decisions_uncounted: EgressDecisionsUncountedTable;
  port_shares: PortSharesTable;
}

/** A monthly egress budget of a host, a user or an egress IP (migration 0014). */
export interface EgressBudgetsTable {
  scope: string;
  subject_id: string;
  limit_bytes: number | string;
  warning_percent: number;
  action: string;
  throttle_bytes_per_second: number | string;
  updated_at: string;
}

/** When a budget's warning share and limit were passed in a month (users are told once a month). */
export interface EgressBudgetMarksTable {
  scope: string;
  subject_id: string;
  month: string;
  warned_at: string | null;
  reached_at: string | null;
}

/** How often a host's egress policy decided one way about one destination in one minute (its start). */
export interface EgressDecisionsTable {
  minute: IsoTime;
  host_id: string;
  user_id: string;
  decision: 'blocked' | 'would_block';
  destination: string;
  port: number;
  /** bigint: PostgreSQL returns it as text. */
  count: number | string;
  last_seen: IsoTime;
}

/** Decisions of a minute left uncounted past the cap on distinct destinations: how many, about how many. */
export interface EgressDecisionsUncountedTable {
  minute: IsoTime;
  host_id: string;
  destinations: number;
  count: number | string;
}

/** A port of a workspace shared through the gateway (migration 0011). */
export interface PortSharesTable {
  id: string;
  host_id: string;
  port: number;
  /** Its host name under SHARE_DOMAIN and its cookie's name: lowercase letters and digits. */
  label: string;
  /** Its port of SHARE_PORTS; null under SHARE_DOMAIN. */
  listen_port: number | null;
  /** JSON array: the signed-in users it is shared with, besides the owner and admins. */
  user_ids: string;
  /** sha256 of its link's secret; null without a link. */
  link_digest: string | null;
  link_expires_at: IsoTime | null;
  created_by: string;
  created_at: IsoTime;
}

/** Bytes through a host's upstream in one hour (`hour`: its start, an IsoTime), per egress IP. */
export interface EgressTrafficTable {
  hour: IsoTime;
  host_id: string;
  egress_ip_id: string;
  user_id: string;
  /** bigint: PostgreSQL returns it as text. */
  bytes_sent: number | string;
  bytes_received: number | string;
}
