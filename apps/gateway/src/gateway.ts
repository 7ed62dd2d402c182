import type { Server } from 'node:http';
import path from 'node:path';
import type { Logger } from 'pino';
import { HostDialer } from './cluster/host-dialer.js';
import { nodeChannelKey } from './cluster/node-channel.js';
import { NodeChannelClient } from './cluster/node-channel-client.js';
import { NodeChannelServer } from './cluster/node-channel-server.js';
import type { Config } from './config.js';
import { Access } from './domain/access/access.js';
import { AccessRevocation } from './domain/access/access-revocation.js';
import { AccessTickets } from './domain/access/access-tickets.js';
import { AuthService } from './domain/access/auth-service.js';
import { FailureRateLimiter } from './domain/access/rate-limiter.js';
import { SecretBox } from './domain/access/secret-box.js';
import { EventsService } from './domain/activity/events-service.js';
import { StatusService } from './domain/activity/status-service.js';
import { EgressBudgetRound } from './domain/egress/egress-budget-round.js';
import { EgressBudgetsService } from './domain/egress/egress-budgets-service.js';
import { EgressDecisionLog } from './domain/egress/egress-decision-log.js';
import { EgressDecisionsService } from './domain/egress/egress-decisions-service.js';
import { EgressIpsService, type EgressTester } from './domain/egress/egress-ips-service.js';
import { EgressMeter } from './domain/egress/egress-meter.js';
import { EgressPolicies } from './domain/egress/egress-policies.js';
import { EgressTrafficService } from './domain/egress/egress-traffic-service.js';
import { ExitDoubtPause } from './domain/egress/exit-doubt-pause.js';
import { AccessScripts } from './domain/entry/access-scripts.js';
import { BootstrapService } from './domain/entry/bootstrap-service.js';
import { CliBundle } from './domain/entry/cli-bundle.js';
import { EntryService } from './domain/entry/entry-service.js';
import { HostLifecycle } from './domain/hosts/host-lifecycle.js';
import { userSseMessage } from './domain/hosts/host-view.js';
import { HostsService } from './domain/hosts/hosts-service.js';
import { ImagesService } from './domain/hosts/images-service.js';
import { HostPolicies } from './domain/hosts/lifecycle-policies.js';
import { LifecycleScheduler } from './domain/hosts/lifecycle-scheduler.js';
import { SessionInputRecorder } from './domain/hosts/session-input.js';
import { NodeRegistry } from './domain/nodes/node-registry.js';
import { NodeRemoval } from './domain/nodes/node-removal.js';
import { ResourceMonitor } from './domain/quotas/resource-monitor.js';
import { ResourcesService } from './domain/quotas/resources-service.js';
import { PortShares } from './domain/shares/port-shares.js';
import { isListeningPortsCommand, LISTENING_PORTS_COMMAND } from './domain/shares/shareable-port.js';
import { TaskRunner } from './domain/tasks/task-runner.js';
import { TasksService } from './domain/tasks/tasks-service.js';
import { sweepExpiredUsers } from './domain/users/expiry-sweep.js';
import { SshKeysService } from './domain/users/ssh-keys-service.js';
import { UsersService } from './domain/users/users-service.js';
import { egressTesterFor } from './egress/egress-tester.js';
import { pathCheckDestinations } from './egress/egress-verification.js';
import { v2rayEngine } from './egress/v2ray-engine.js';
import { BackgroundEvents } from './events/background-events.js';
import { EventBus } from './events/event-bus.js';
import { EventLogWriter } from './events/event-log.js';
import { LiveFeed } from './events/live-feed.js';
import { SseHub, type SseSubscriber } from './events/sse-hub.js';
import { SseProjection } from './events/sse-projection.js';
import type { Api } from './http/api.js';
import { buildEntryApp, buildHttpApp } from './http/app.js';
import { listenDashboardPort } from './http/plugins/dashboard.js';
import { GatewayMetrics } from './http/plugins/metrics.js';
import { type ContainerEngine, DockerEngine } from './runtime/container-engine.js';
import { WORKSPACE_UID } from './runtime/container-specs.js';
import { DockerWorkspaceRuntime, gatewayInstanceId } from './runtime/docker-workspace-runtime.js';
import { expectedImageTag } from './runtime/image-inputs.js';
import { DockerActivityProbe, type WorkspaceActivityProbe } from './runtime/workspace-activity.js';
import type { WorkspaceRuntime } from './runtime/workspace-runtime.js';
import { ClusterBus } from './shared/cluster-messages.js';
import { FolderMounts } from './ssh/folder-mounts.js';
import { PortTunnels } from './ssh/port-tunnels.js';
import { ShareProxy } from './ssh/share-proxy.js';
import { SshProxy } from './ssh/ssh-proxy.js';
import { WebTerminals } from './ssh/web-terminal.js';
import { type Database, openDatabase } from './store/database.js';
import { MetricsRepository } from './store/metrics-repository.js';
import { createRepositories, type Repositories } from './store/repositories.js';
import { DesktopControl, isDesktopControl } from './vnc/desktop-control.js';
import { desktopPageUrl, type Portal } from './vnc/vnc-access.js';
import { VncProxy } from './vnc/vnc-proxy.js';

export interface GatewayOptions {
  /** Replaces the Docker engine (tests of a single module only). */
  engine?: ContainerEngine;
  logger: Logger;
  /** Replaces the egress tester (unit tests of one module only). */
  egressTester?: EgressTester;
  /** The engine behind hosts; the Docker driver for the configured images by default. */
  runtime?: WorkspaceRuntime;
  /** Disables per-request logs (benchmarks, tests). */
  httpLogger?: boolean;
  /** Reads workspaces' activity; the Docker engine's by default. */
  activityProbe?: WorkspaceActivityProbe;
  /** The lifecycle policy's clock (tests of schedules move a fake one). */
  clock?: () => number;
}

/** The whole gateway wired together: database, services, HTTP app and background jobs. */
export interface Gateway {
  config: Config;
  database: Database;
  repositories: Repositories;
  bus: EventBus;
  sse: SseHub;
  users: UsersService;
  egressIps: EgressIpsService;
  hosts: HostsService;
  lifecycle: HostLifecycle;
  /** Idle stop, maximum lifetime and schedule: the rounds (run every HOST_ACTIVITY_SECONDS, or by tests). */
  lifecycleScheduler: LifecycleScheduler;
  /** A person's input in this gateway's sessions, recorded as their hosts' activity before each of those rounds. */
  sessionInput: SessionInputRecorder;
  /** Grants: every lifecycle call needs one (the gateway's own work asks `access.system(reason)`). */
  access: Access;
  tasks: TaskRunner;
  limiter: FailureRateLimiter;
  revocation: AccessRevocation;
  http: Api;
  ssh: SshProxy;
  metrics: GatewayMetrics;
  /** Reads the egress gateways' byte counters into the hourly figures (every EGRESS_METER_SECONDS). */
  egressMeter: EgressMeter;
  egressBudgetRound: EgressBudgetRound;
  exitDoubtPause: ExitDoubtPause;
  /** Reads what egress policies blocked into the per-minute counts (every EGRESS_POLICY_LOG_SECONDS). */
  egressDecisionLog: EgressDecisionLog;
  listen(): Promise<void>;
  close(): Promise<void>;
}

export async function createGateway(config: Config, options: GatewayOptions): Promise<Gateway> {
  const { logger } = options;
  const database = await openDatabase(config.database);
  const cluster = new ClusterBus(database.changes, logger.child({ component: 'cluster' }));
  const repositories = createRepositories(database, cluster);
  const box = SecretBox.openInDirectory(config.dataDir);
  const docker = new DockerEngine(config.dockerSocket);
  const engine = options.engine ?? docker;
  const instanceId = gatewayInstanceId(path.join(config.dataDir, 'runtime'));
  // Per gateway: several gateways may share the machine (and MOUNTS_DIR), each sweeping only its own.
  const mountsRoot = path.join(config.folderMounts.dir, instanceId);
  const runtime =
    options.runtime ??
    new DockerWorkspaceRuntime({
      docker: docker.docker,
      engine: v2rayEngine,
      images: {
        workspace: await expectedImageTag('workspace', config.workspaceImageVariant),
        egressGateway: await expectedImageTag('egress-gateway'),
      },
      dataDir: config.dataDir,
      egress: config.egress,
      folderMountsDir: mountsRoot,
      log: logger.child({ component: 'runtime' }),
      egressPool: config.egressGatewayPool,
    });
  const accessSettings = {
    publicHost: config.publicHost,
    publicApiUrl: config.publicApiUrl,
    publicEntryUrl: config.publicEntryUrl,
    sshProxyPort: config.sshProxyPort,
    desktopUrl: (portal: Portal, hostId: string) => desktopPageUrl(config.publicApiUrl, portal, hostId),
    resourceDefaults: config.workspaceLimits,
    egressPolicyDefault: config.egress.policy,
  };
  const sse = new SseHub({
    heartbeatMs: config.sseHeartbeatSeconds * 1000,
    // The access rules come below; the hub asks only once streams exist.
    stillHolds: (stream: SseSubscriber): Promise<boolean> =>
      access.holder(stream.userId, stream.tokenVersion, stream.role).then(
        () => true,
        () => false,
      ),
  });
  // Several gateways may share PostgreSQL: live messages go through its table so every gateway's streams get them.
  const live =
    database.kind === 'postgres'
      ? new LiveFeed(sse, repositories.liveMessages, cluster, logger.child({ component: 'live' }))
      : null;
  const bus = new EventBus(
    new EventLogWriter(repositories.events, logger.child({ component: 'events' })),
    new SseProjection(live ?? sse, (message) => userSseMessage(message, accessSettings)),
  );
  const limiter = new FailureRateLimiter({ log: repositories.authFailures });
  const revocation = new AccessRevocation(bus, cluster, (error) =>
    logger.warn({ err: error }, 'a revocation was not carried out everywhere'),
  );
  bus.on('user.access_ended', ({ userId }) => sse.closeForUser(userId));

  const tickets = new AccessTickets(repositories.accessTickets, 'ssh');
  const access = new Access(
    repositories.users,
    repositories.hosts,
    repositories.sshKeys,
    box,
    limiter,
    tickets,
    bus,
    repositories.accessTickets,
    repositories.tasks,
    { ipv6PrefixBits: config.rateLimitIpv6Prefix },
  );
  const auth = new AuthService(access, bus, config);
  const users = new UsersService(repositories.users, box, bus, revocation, access);
  const sshKeys = new SshKeysService(repositories.sshKeys, repositories.users, bus);
  const egressIps = new EgressIpsService(
    repositories.egressIps,
    box,
    bus,
    options.egressTester ?? egressTesterFor(config.egress, v2rayEngine),
  );
  const events = new EventsService(repositories.events);
  const taskRunner = new TaskRunner(
    repositories.tasks,
    bus,
    logger.child({ component: 'tasks' }),
    cluster,
    config.node.name,
  );
  const nodes = new NodeRegistry(
    repositories.nodes,
    repositories.hosts,
    bus,
    accessSettings,
    {
      name: config.node.name,
      instanceId,
      exclusiveDatabase: database.kind === 'sqlite',
      maxHosts: config.node.maxHosts,
      heartbeatSeconds: config.node.heartbeatSeconds,
      deadSeconds: config.node.deadSeconds,
      internalAddress: config.node.internalAddress,
      // Called from the heartbeat, after `images` exists.
      imagesReady: () => images.ready,
    },
    logger.child({ component: 'nodes' }),
  );
  const dialer = new HostDialer({
    runtime,
    isLocal: (node) => nodes.isLocal(node),
    channel: new NodeChannelClient({
      self: nodes.name,
      key: nodeChannelKey(box, nodes.name),
      findNode: (name) => nodes.find(name),
    }),
  });
  // Sessions to this node's hosts arriving at other gateways come in here; without INTERNAL_BIND, none do.
  const channel = config.node.internalBind
    ? new NodeChannelServer({
        bind: config.node.internalBind,
        self: nodes.name,
        keyOf: (name) => nodeChannelKey(box, name),
        isNode: async (name) => (await nodes.find(name)) !== undefined,
        findHost: (hostId) => repositories.hosts.findById(hostId),
        local: {
          open: (hostId, service) => dialer.openLocal(hostId, service),
          exec: (hostId, command, timeoutMs) => runtime.exec(hostId, command, timeoutMs),
        },
        execAllowed: (command) => isDesktopControl(command) || isListeningPortsCommand(command),
        log: logger.child({ component: 'node-channel' }),
      })
    : null;
  const ssh = new SshProxy({
    host: config.sshProxyHost,
    port: config.sshProxyPort,
    dataDir: config.dataDir,
    access,
    bus,
    dialer,
    folderMounts: new FolderMounts({
      runtime,
      events: new BackgroundEvents(bus, logger),
      user: config.folderMounts.user,
      workspaceUid: WORKSPACE_UID,
      log: logger.child({ component: 'folder-mounts' }),
    }),
    accessSettings,
    tasks: taskRunner,
    limits: {
      unauthenticatedPerAddress: config.sshMaxUnauthenticatedPerAddress,
      sessionsPerUser: config.sshMaxSessionsPerUser,
      sessionsPerHost: config.sshMaxSessionsPerHost,
    },
    log: logger.child({ component: 'ssh' }),
  });
  const desktop = new DesktopControl({
    dialer,
    bus,
    log: logger.child({ component: 'vnc' }),
  });
  const vnc = new VncProxy({
    auth,
    access,
    dialer,
    bus,
    log: logger.child({ component: 'vnc' }),
    publicApiUrl: config.publicApiUrl,
  });
  const terminals = new WebTerminals({
    access,
    dialer,
    bus,
    log: logger.child({ component: 'terminal' }),
    publicApiUrl: config.publicApiUrl,
    terminalsPerUser: config.terminalsPerUser,
  });
  const shareBase = new URL(config.publicApiUrl);
  const shares = new PortShares({
    shares: repositories.portShares,
    hosts: repositories.hosts,
    users: repositories.users,
    tickets: repositories.accessTickets,
    access,
    box,
    bus,
    settings: config.shares,
    originOf: ({ label, listen_port }) =>
      listen_port === null
        ? `${shareBase.protocol}//${label}.${config.shares.domain}${shareBase.port ? `:${shareBase.port}` : ''}`
        : `${shareBase.protocol}//${shareBase.hostname}:${listen_port}`,
    listPorts: async (host) => {
      const result = await dialer.exec(host, LISTENING_PORTS_COMMAND, 10_000);
      return result ? result.stdout : null;
    },
    ...(options.clock ? { now: options.clock } : {}),
  });
  const shareProxy = new ShareProxy({
    shares,
    tunnels: new PortTunnels({ dialer, log: logger.child({ component: 'shares' }) }),
    settings: config.shares,
    bus,
    log: logger.child({ component: 'shares' }),
    bindHost: config.httpHost,
    portalUrl: `${config.publicApiUrl}/portal`,
  });
  const status = new StatusService(
    database,
    engine,
    repositories.stats,
    { ssh: () => ssh.sessionCount(), vnc: () => vnc.sessionCount() },
    () => nodes.list(),
  );
  const metricsCounts = new MetricsRepository(database.db);
  const egressTraffic = new EgressTrafficService(repositories.egressTraffic);
  const egressMeter = new EgressMeter(
    runtime,
    repositories.hosts,
    repositories.egressTraffic,
    logger.child({ component: 'egress-meter' }),
  );
  const egressDecisions = new EgressDecisionsService(
    repositories.egressDecisions,
    () => config.egress.policy,
  );
  const egressDecisionLog = new EgressDecisionLog(
    runtime,
    repositories.hosts,
    repositories.egressDecisions,
    bus,
    config.egressPolicyLog.destinations,
    logger.child({ component: 'egress-decisions' }),
  );
  const metrics = new GatewayMetrics({
    sshSessions: () => ssh.sessionCount(),
    vncSessions: () => vnc.sessionCount(),
    terminalSessions: () => terminals.sessionCount(),
    shareStreams: () => shareProxy.streamCount(),
    shares: () => shares.count(),
    sseClients: () => sse.size,
    counts: () => metricsCounts.counts(),
    // Read at scrape time, when the service below exists.
    resources: () => resources.metrics(),
    egressTraffic: () => egressTraffic.allTime(),
    egressDecisions: () => egressDecisions.allTime(),
  });

  const resources = new ResourcesService(
    repositories.hosts,
    repositories.users,
    repositories.quotaLock,
    runtime,
    bus,
    accessSettings,
    config.workspaceLimits,
  );
  const resourceMonitor = new ResourceMonitor(
    repositories.hosts,
    runtime,
    bus,
    accessSettings,
    logger.child({ component: 'resources' }),
  );
  const lifecycle = new HostLifecycle(
    repositories.hosts,
    egressIps,
    runtime,
    taskRunner,
    bus,
    accessSettings,
    resources,
    logger.child({ component: 'hosts' }),
    (hostId) => access.desktopPassword(hostId),
    cluster,
  );
  const nodeRemoval = new NodeRemoval(nodes, repositories.hosts, taskRunner, bus, accessSettings);
  const hosts = new HostsService(
    repositories.hosts,
    repositories.users,
    repositories.egressIps,
    users,
    lifecycle,
    box,
    bus,
    accessSettings,
    access,
    nodes,
    resources,
  );
  const hostPolicies = new HostPolicies(
    repositories.hosts,
    repositories.users,
    bus,
    accessSettings,
    config.hostLifecycle,
    options.clock,
  );
  const egressPolicies = new EgressPolicies(
    repositories.hosts,
    repositories.users,
    bus,
    accessSettings,
    lifecycle,
    pathCheckDestinations(config.egress).rules,
  );
  const sessionInput = new SessionInputRecorder([ssh.input, terminals.input, vnc.input], repositories.hosts);
  const lifecycleScheduler = new LifecycleScheduler({
    hosts: repositories.hosts,
    users: repositories.users,
    lifecycle,
    access,
    tasks: taskRunner,
    bus,
    probe: options.activityProbe ?? new DockerActivityProbe(docker.docker),
    tellSessions: (hostId, text) => ssh.tellSessions(hostId, text),
    cluster,
    accessSettings,
    settings: config.hostLifecycle,
    log: logger.child({ component: 'host-policy' }),
    ...(options.clock ? { now: options.clock } : {}),
  });
  const egressBudgetRound = new EgressBudgetRound({
    budgets: repositories.egressBudgets,
    traffic: repositories.egressTraffic,
    hosts: repositories.hosts,
    runtime,
    lifecycle,
    access,
    tasks: taskRunner,
    bus,
    tell: (hostId, text) => lifecycleScheduler.tellUsers(hostId, text),
    accessSettings,
    settings: config.egressBudgets,
    log: logger.child({ component: 'egress-budgets' }),
  });
  const exitDoubtPause = new ExitDoubtPause({
    hosts: repositories.hosts,
    egressIps: repositories.egressIps,
    runtime,
    bus,
    tell: (hostId, text) => lifecycleScheduler.tellUsers(hostId, text),
    accessSettings,
    node: taskRunner.node,
    enabled: config.egressBudgets.pauseWhenInDoubt,
    log: logger.child({ component: 'exit-doubt-pause' }),
  });
  const egressBudgets = new EgressBudgetsService(
    repositories.egressBudgets,
    repositories.egressTraffic,
    { hosts: repositories.hosts, users: repositories.users, egressIps: repositories.egressIps },
    config.egressBudgets,
    () => egressBudgetRound.round(),
  );
  const tasks = new TasksService(repositories.tasks);
  const entry = new EntryService(
    repositories.hosts,
    repositories.tasks,
    access,
    lifecycle,
    box,
    bus,
    accessSettings,
  );
  const bootstrap = new BootstrapService(
    repositories.users,
    repositories.hosts,
    repositories.tasks,
    access,
    lifecycle,
    tickets,
    bus,
    accessSettings,
    repositories.accessTickets,
    (taskId) => box.derive(`bootstrap handoff ${taskId}`, 24).toString('base64url'),
  );
  const scripts = new AccessScripts(accessSettings);
  const cli = new CliBundle(config.cliBundle, config.publicApiUrl);
  const images = new ImagesService(runtime, bus, taskRunner);
  bus.on('egress_ip.upstream_changed', async ({ egressIpId, replaced }) => {
    // Gateways started ahead for the old upstream go first: no start may take one.
    await runtime
      .retireEgressGateways(egressIpId)
      .catch((error: unknown) => logger.warn({ err: error }, 'retiring pooled egress gateways failed'));
    await lifecycle.egressChanged(access.system('egress IP changed'), egressIpId, replaced);
  });
  bus.on('egress_ip.deleted', async ({ data }) => {
    const egressIpId = (data as { egress_ip_id?: unknown } | undefined)?.egress_ip_id;
    if (typeof egressIpId === 'string')
      await runtime
        .retireEgressGateways(egressIpId)
        .catch((error: unknown) => logger.warn({ err: error }, 'retiring pooled egress gateways failed'));
  });
  bus.on('host.policy_stop', async ({ data }) => metrics.countPolicyStop(data.reason));
  bus.on('host.stop_warning', async ({ data }) => metrics.countStopWarning(data.reason));
  bus.on('runtime.notice', ({ notice }) => lifecycle.runtimeNotice(access.system('engine notice'), notice));
  // This node joined again after it was removed (recorded events are this gateway's own). Not a full reconcile:
  // the tasks it runs now are not interrupted.
  bus.on('node.rejoined', () => lifecycle.stopMovedAway(access.system('node rejoined'), config.node.name));
  bus.on('user.access_revoked', async ({ userId, reason }) => {
    if (reason === 'deleted') await lifecycle.removeHostsOf(access.system('owner deleted'), userId);
    else if (reason === 'disabled' || reason === 'expired')
      await lifecycle.stopHostsOf(access.system(`owner ${reason}`), userId);
  });

  const timers: NodeJS.Timeout[] = [];
  /** Background jobs under way: shutdown waits for them before it closes the database under them. */
  const jobs = new Set<Promise<unknown>>();
  const every = (seconds: number, name: string, job: () => Promise<unknown>) => {
    const timer = setInterval(() => {
      const run = job()
        .catch((error: unknown) => logger.error({ err: error, job: name }, 'background job failed'))
        .finally(() => jobs.delete(run));
      jobs.add(run);
    }, seconds * 1000);
    timer.unref();
    timers.push(timer);
  };

  await live?.start();
  await nodes.register();
  // From the registration on: the rest of the start-up (the HTTP app, the engine's clean-up, the reconcile) can
  // take longer than NODE_DEAD_SECONDS on a busy machine, and the other nodes would find this one silent and
  // mark the hosts it just took back unavailable again.
  every(config.node.heartbeatSeconds, 'node-heartbeat', () => nodes.heartbeat());
  if ((await users.ensureAdmin(config.adminUsername, config.adminPassword)) === 'created') {
    logger.info({ username: config.adminUsername }, 'created the first admin account');
  }

  const httpServices = {
    config,
    access,
    auth,
    users,
    sshKeys,
    egressIps,
    egressTraffic,
    egressBudgets,
    egressDecisions,
    hosts,
    lifecycle,
    resources,
    hostPolicies,
    egressPolicies,
    tasks,
    images,
    events,
    status,
    nodeRemoval,
    sse: live ?? sse,
    entry,
    bootstrap,
    scripts,
    cli,
    desktop,
    vnc,
    terminals,
    shares,
  };
  const httpLogger = options.httpLogger === false ? false : logger;
  const http = await buildHttpApp(httpServices, httpLogger, metrics);
  const entryListener = config.entryPort > 0 ? buildEntryApp(httpServices, httpLogger) : null;

  let unwatch = () => {};
  let dashboardListener: Server | null = null;

  return {
    config,
    database,
    repositories,
    bus,
    sse,
    users,
    egressIps,
    hosts,
    lifecycle,
    lifecycleScheduler,
    sessionInput,
    access,
    tasks: taskRunner,
    limiter,
    revocation,
    http,
    ssh,
    metrics,
    egressMeter,
    egressBudgetRound,
    exitDoubtPause,
    egressDecisionLog,
    async listen() {
      shareProxy.divert(http.server);
      await http.listen({ host: config.httpHost, port: config.httpPort });
      await shareProxy.listen();
      await entryListener?.listen({ host: config.httpHost, port: config.entryPort });
      if (config.dashboardPort > 0)
        dashboardListener = await listenDashboardPort(http, config.httpHost, config.dashboardPort);
      if (config.metricsBind) await metrics.listen(config.metricsBind.host, config.metricsBind.port);
      await ssh.listen();
      await channel?.listen();
      // With port 0 (tests) hosts must advertise the port really bound.
      accessSettings.sshProxyPort = ssh.port;
      every(config.expirySweepSeconds, 'expiry-sweep', () =>
        sweepExpiredUsers(repositories.users, revocation, bus),
      );
      every(3600, 'event-retention', () => events.prune(config.eventRetentionDays));
      // The egress figures are kept as long as the event log.
      every(3600, 'egress-traffic-retention', () => egressTraffic.prune(config.eventRetentionDays));
      if (config.egressMeterSeconds > 0)
        every(config.egressMeterSeconds, 'egress-meter', async () => {
          await egressMeter.sample();
          await egressBudgetRound.round();
        });
      every(3600, 'egress-decisions-retention', () => egressDecisions.prune(config.eventRetentionDays));
      if (config.egressPolicyLog.seconds > 0)
        every(config.egressPolicyLog.seconds, 'egress-decisions', () => egressDecisionLog.read());
      if (live) every(60, 'live-message-retention', () => live.prune());
      if (config.hostCheckSeconds > 0)
        every(config.hostCheckSeconds, 'host-check', () =>
          lifecycle.checkRunning(access.system('host check'), nodes.name),
        );
      if (config.resourceCheckSeconds > 0)
        every(config.resourceCheckSeconds, 'resource-check', () =>
          resourceMonitor.check(access.system('resource check'), nodes.name),
        );
      if (config.egressHealthSeconds > 0) {
        let checking = false;
        every(config.egressHealthSeconds, 'egress-health', async () => {
          if (checking) return; // a slow round (failing upstreams time out) is not stacked
          checking = true;
          await lifecycle
            .checkUpstreams(access.system('egress health round'))
            .then(() => exitDoubtPause.round())
            .finally(() => {
              checking = false;
            });
        });
      }
      unwatch = runtime.watch(
        (error) => logger.warn({ err: error }, 'following the container engine failed'),
        (notice) =>
          void bus
            .emit({ type: 'runtime.notice', notice })
            .catch((error: unknown) => logger.warn({ err: error }, 'logging an engine notice failed')),
      );
      await FolderMounts.sweep(mountsRoot, logger);
      // Gateways an earlier process started ahead are not known to this one: removed, with their files. An
      // engine that does not answer yet is no reason not to serve (the reconcile says what it cannot reach).
      await runtime
        .retireEgressGateways()
        .catch((error: unknown) =>
          logger.warn({ err: error }, 'removing pooled egress gateways left before failed'),
        );
      await lifecycle.reconcile(access.system('start-up reconcile'), nodes.name);
      lifecycle.follow();
      lifecycleScheduler.follow();
      exitDoubtPause.follow();
      if (config.hostLifecycle.roundSeconds > 0) {
        every(config.hostLifecycle.roundSeconds, 'host-lifecycle-policy', async () => {
          await sessionInput.record();
          await lifecycleScheduler.round();
        });
      }
      taskRunner.start();
      const checkImages = () =>
        images.check().catch((error: unknown) => logger.warn({ err: error }, 'image check failed'));
      every(300, 'image-check', checkImages);
      await checkImages();
      // Placement reads whether this node has its images from the heartbeat: say it now.
      await nodes.heartbeat();
      await sweepExpiredUsers(repositories.users, revocation, bus);
    },
    async close() {
      for (const timer of timers) clearInterval(timer);
      taskRunner.stop();
      await lifecycle.preparedAhead();
      unwatch();
      sse.closeAll();
      await ssh.close();
      await vnc.close();
      await terminals.close();
      await shareProxy.close();
      await channel?.close();
      await entryListener?.close();
      await metrics.close();
      dashboardListener?.closeAllConnections();
      dashboardListener?.close();
      await http.close();
      await taskRunner.idle();
      await runtime
        .retireEgressGateways()
        .catch((error: unknown) => logger.warn({ err: error }, 'removing the pooled egress gateways failed'));
      // What stops read from gateways is held in memory until sampled; the counters still running stay in
      // the gateways for the next process to read.
      if (config.egressMeterSeconds > 0)
        await egressMeter
          .sample()
          .catch((error: unknown) => logger.warn({ err: error }, 'the last egress sample failed'));
      // A slow round (an upstream timing out) is not waited out: 5 s at most.
      await Promise.race([Promise.all(jobs), new Promise((resolve) => setTimeout(resolve, 5000).unref())]);
      await live?.close();
      await nodes
        .leave()
        .catch((error: unknown) => logger.warn({ err: error }, 'could not say this node left'));
      await database.close();
    },
  };
}
