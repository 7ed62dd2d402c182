import { createServer, type Server } from 'node:http';
import type { EgressTestResult, HostStatus, QuotaName, StopReason, UserResources } from '@ccp/api';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { AuthService } from '../../domain/access/auth-service.js';
import type { Api } from '../api.js';
import { requireRole } from './authentication.js';

/** What the gauges read at scrape time. */
export interface MetricsSource {
  sshSessions(): number;
  vncSessions(): number;
  terminalSessions(): number;
  /** Requests and WebSockets relayed through shared ports now. */
  shareStreams(): number;
  /** Shared ports held (all gateways). */
  shares(): Promise<number>;
  sseClients(): number;
  counts(): Promise<{
    hosts: Array<{ status: string; count: number }>;
    tasks: Array<{ kind: string; status: string; count: number }>;
    /** `lastTest` is the stored EgressTestResult JSON. */
    egressTests: Array<{ id: string; label: string; lastTest: string }>;
  }>;
  /** Every user's quotas and use, and how many hosts have each resource alert. */
  resources(): Promise<{ users: UserResources[]; alerts: Record<string, number> }>;
  /** Bytes through the upstreams since the figures began, per host and per egress IP. */
  egressTraffic(): Promise<{
    hosts: Array<{ id: string; sent: number; received: number }>;
    egressIps: Array<{ id: string; sent: number; received: number }>;
  }>;
  /** Connections egress policies blocked or would have blocked since the figures began, per decision. */
  egressDecisions?(): Promise<Array<{ decision: string; count: number }>>;
}

type Counts = Awaited<ReturnType<MetricsSource['counts']>>;
type Traffic = Awaited<ReturnType<MetricsSource['egressTraffic']>>;

const HOST_STATUSES: HostStatus[] = [
  'created',
  'starting',
  'running',
  'stopping',
  'stopped',
  'rebuilding',
  'failed',
];

/** The gateway's Prometheus registry: HTTP traffic is counted as it happens, everything else is read when
 * scraped, so the figures are those of the database and the live sessions, also after a restart. */
export class GatewayMetrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'method' | 'route' | 'status'>;
  private readonly duration: Histogram<'method' | 'route'>;
  private readonly policyStops: Counter<'reason'>;
  private readonly stopWarnings: Counter<'reason'>;
  private pending: Promise<Counts | null> | null = null;
  private pendingTraffic: Promise<Traffic | null> | null = null;
  /** The METRICS_BIND listener, once `listen` was called. */
  server: Server | null = null;

  constructor(private readonly source: MetricsSource) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.requests = new Counter({
      name: 'ccp_http_requests_total',
      help: 'HTTP requests answered, by method, route pattern and status code',
      labelNames: ['method', 'route', 'status'],
      registers,
    });
    this.duration = new Histogram({
      name: 'ccp_http_request_duration_seconds',
      help: 'Time to answer HTTP requests, by method and route pattern',
      labelNames: ['method', 'route'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
      registers,
    });
    // This gateway's lifecycle rounds (each node runs its own hosts'), counted as they act.
    const reasons: StopReason[] = ['idle', 'lifetime', 'schedule'];
    this.policyStops = new Counter({
      name: 'ccp_host_policy_stops_total',
      help: 'Hosts this gateway stopped for their lifecycle policy, by reason (idle, lifetime, schedule)',
      labelNames: ['reason'],
      registers,
    });
    this.stopWarnings = new Counter({
      name: 'ccp_host_stop_warnings_total',
      help: 'Warnings of a coming policy stop this gateway sent (event, live message, terminals), by reason',
      labelNames: ['reason'],
      registers,
    });
    for (const reason of reasons) {
      this.policyStops.inc({ reason }, 0);
      this.stopWarnings.inc({ reason }, 0);
    }
    const live = (name: string, help: string, read: () => number) =>
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(read());
        },
      });
    live('ccp_ssh_sessions', 'Open SSH proxy sessions', () => source.sshSessions());
    live('ccp_vnc_sessions', 'Open VNC (remote desktop) sessions', () => source.vncSessions());
    live('ccp_terminal_sessions', 'Open browser terminals (WebSocket to tmux)', () =>
      source.terminalSessions(),
    );
    live('ccp_sse_clients', 'Connected SSE clients', () => source.sseClients());
    live('ccp_share_streams', 'Requests and WebSockets relayed through shared ports now', () =>
      source.shareStreams(),
    );
    new Gauge({
      name: 'ccp_port_shares',
      help: 'Ports of workspaces shared through the gateway',
      registers,
      async collect() {
        this.set(await source.shares());
      },
    });

    const counts = () => this.counts();
    new Gauge({
      name: 'ccp_database_up',
      help: 'Whether the last scrape could read the database (the counts below are missing when 0)',
      registers,
      async collect() {
        this.set((await counts()) ? 1 : 0);
      },
    });
    new Gauge({
      name: 'ccp_hosts',
      help: 'Hosts by status',
      labelNames: ['status'],
      registers,
      async collect() {
        const read = await counts();
        this.reset();
        if (!read) return;
        for (const status of HOST_STATUSES) this.set({ status }, 0);
        for (const row of read.hosts) this.set({ status: row.status }, row.count);
      },
    });
    new Gauge({
      name: 'ccp_tasks',
      help: 'Host tasks in the database by kind and status (pending, running, succeeded, failed)',
      labelNames: ['kind', 'status'],
      registers,
      async collect() {
        const read = await counts();
        this.reset();
        for (const row of read?.tasks ?? []) this.set({ kind: row.kind, status: row.status }, row.count);
      },
    });
    const resources = () => source.resources().catch(() => null);
    const quota = (
      name: string,
      help: string,
      value: (user: UserResources, quota: QuotaName) => number | null,
    ) =>
      new Gauge({
        name,
        help,
        labelNames: ['username', 'quota'],
        registers,
        async collect() {
          const read = await resources();
          this.reset();
          for (const user of read?.users ?? [])
            for (const key of Object.keys(user.usage) as QuotaName[]) {
              const measured = value(user, key);
              if (measured !== null) this.set({ username: user.username, quota: key }, measured);
            }
        },
      });
    quota(
      'ccp_user_quota_used',
      "What each user's hosts take of each quota (hosts, running_hosts, cpus, memory_mb, home_mb)",
      (user, key) => user.usage[key],
    );
    quota('ccp_user_quota_limit', "Each user's quota where one is set", (user, key) => user.quotas[key]);
    new Gauge({
      name: 'ccp_host_resource_alerts',
      help: 'Running hosts short of a resource now, by kind (memory_pressure, memory_oom_kill, home_nearly_full)',
      labelNames: ['kind'],
      registers,
      async collect() {
        const read = await resources();
        this.reset();
        for (const kind of ['memory_pressure', 'memory_oom_kill', 'home_nearly_full'])
          this.set({ kind }, read?.alerts[kind] ?? 0);
      },
    });
    const egress = (name: string, help: string, value: (result: EgressTestResult) => number | null) =>
      new Gauge({
        name,
        help,
        labelNames: ['egress_ip_id', 'label'],
        registers,
        async collect() {
          const read = await counts();
          this.reset();
          for (const row of read?.egressTests ?? []) {
            const measured = value(JSON.parse(row.lastTest) as EgressTestResult);
            if (measured !== null) this.set({ egress_ip_id: row.id, label: row.label }, measured);
          }
        },
      });
    egress('ccp_egress_test_ok', 'Last egress test of each egress IP: 1 passed, 0 failed', (r) =>
      r.ok ? 1 : 0,
    );
    egress(
      'ccp_egress_test_duration_seconds',
      'Duration of the last egress test',
      (r) => r.duration_ms / 1000,
    );
    egress(
      'ccp_egress_test_latency_seconds',
      'Connection latency through the upstream in the last test',
      (r) => (r.checks.connectivity.latency_ms === null ? null : r.checks.connectivity.latency_ms / 1000),
    );
    egress('ccp_egress_test_timestamp_seconds', 'When the last egress test ran (Unix time)', (r) =>
      Math.round(Date.parse(r.tested_at) / 1000),
    );
    this.egressTrafficCounters(registers);
    const decisions = source.egressDecisions?.bind(source);
    if (decisions)
      new Counter({
        name: 'ccp_egress_policy_decisions_total',
        help: 'Connections egress policies blocked (decision="blocked") or would have blocked in log-only mode (decision="would_block"), from the per-minute counts',
        labelNames: ['decision'],
        registers,
        async collect() {
          const read = await decisions().catch(() => null);
          this.reset();
          for (const row of read ?? []) this.inc({ decision: row.decision }, row.count);
        },
      });
  }

  /**
   * Counters from the egress meter's stored figures: they survive a restart, and fall back when the event log's
   * retention drops old hours (a counter reset to Prometheus).
   */
  private egressTrafficCounters(registers: Registry[]): void {
    const traffic = () => {
      this.pendingTraffic ??= this.source.egressTraffic().catch(() => null);
      return this.pendingTraffic;
    };
    const counter = (name: string, help: string, label: 'host_id' | 'egress_ip_id') =>
      new Counter({
        name,
        help,
        labelNames: [label, 'direction'],
        registers,
        async collect() {
          const read = await traffic();
          this.reset();
          for (const row of (label === 'host_id' ? read?.hosts : read?.egressIps) ?? []) {
            this.inc({ [label]: row.id, direction: 'sent' }, row.sent);
            this.inc({ [label]: row.id, direction: 'received' }, row.received);
          }
        },
      });
    counter(
      'ccp_host_egress_bytes_total',
      "Bytes through each host's upstream, sent and received",
      'host_id',
    );
    counter(
      'ccp_egress_ip_bytes_total',
      'Bytes through each egress IP, sent and received (all hosts)',
      'egress_ip_id',
    );
  }

  /** A host stopped by its lifecycle policy (the `host.policy_stop` event). */
  countPolicyStop(reason: StopReason): void {
    this.policyStops.inc({ reason });
  }

  /** Users warned of a coming policy stop (the `host.stop_warning` event). */
  countStopWarning(reason: StopReason): void {
    this.stopWarnings.inc({ reason });
  }

  /** Counts HTTP requests and serves GET /metrics to admins on the main port. */
  register(app: Api, auth: AuthService): void {
    app.addHook('onResponse', async (request, reply) => {
      // The route pattern, not the URL, keeps the label set bounded; unknown paths share one label.
      const route = request.routeOptions.url ?? 'unmatched';
      this.requests.inc({ method: request.method, route, status: String(reply.statusCode) });
      this.duration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
    });
    app.get(
      '/metrics',
      { onRequest: requireRole(auth, 'admin'), schema: { hide: true } },
      async (_request, reply) => {
        reply.type(this.registry.contentType);
        return this.scrape();
      },
    );
  }

  /** Serves GET /metrics without a token on a separate address (METRICS_BIND), for a Prometheus server. */
  async listen(host: string, port: number): Promise<void> {
    const server = createServer((request, response) => {
      if (request.method !== 'GET' || request.url?.split('?')[0] !== '/metrics') {
        response.writeHead(404, { 'content-type': 'text/plain' }).end('only GET /metrics is served here\n');
        return;
      }
      this.scrape().then(
        (text) => response.writeHead(200, { 'content-type': this.registry.contentType }).end(text),
        (error: unknown) =>
          response.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${String(error)}\n`),
      );
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** The text exposition; the database is read once per scrape, for all the gauges that need it. */
  scrape(): Promise<string> {
    this.pending = null;
    this.pendingTraffic = null;
    return this.registry.metrics();
  }

  /** Null when the database failed, so the live figures are still served during an outage. */
  private counts(): Promise<Counts | null> {
    this.pending ??= this.source.counts().catch(() => null);
    return this.pending;
  }
}
