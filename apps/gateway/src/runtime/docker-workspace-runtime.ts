import { randomBytes } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { rm, rmdir } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import type { EgressPolicy } from '@ccp/api';
import type Docker from 'dockerode';
import { type VerificationPlan, verificationPlan } from '../egress/egress-verification.js';
import type { EgressSettings } from '../egress/settings.js';
import type { ReadDecisions, TunnelEngine } from '../egress/tunnel-engine.js';
import { execCapped } from './container-exec.js';
import {
  DESKTOP_CONTROL,
  DESKTOP_CONTROL_TIMEOUT_MS,
  EGRESS_GATEWAY_RESTART,
  egressGatewayContainer,
  egressGatewayName,
  HOST_LABEL,
  homeVolume,
  OWNER_LABEL,
  POOL_LABEL,
  ROLE_LABEL,
  type Role,
  SPEC_LABEL,
  UPLINK_NETWORK,
  WORKSPACE_UID,
  workspaceContainer,
  workspaceLimitsConfig,
  workspaceSpecHash,
} from './container-specs.js';
import { DNS_REFUSAL_LOG_PATH, takeDecisionLog } from './decision-log.js';
import { desktopPasswordArchive } from './desktop-secret.js';
import { type HeldNetns, watchNetns } from './early-netns.js';
import {
  EGRESS_GATEWAY_LIMITS,
  type EgressGatewayFiles,
  GATEWAY_NETWORK,
  WORKSPACE_PORTS,
} from './egress-gateway-files.js';
import { EgressGatewayPool, gatewayFilesKey, type PooledGateway } from './egress-gateway-pool.js';
import { throttleGateway } from './egress-throttle.js';
import { asRuntimeError, ignoreStatus, lastLogLines, statusCode } from './engine-errors.js';
import { EngineWatcher, HOST_ID } from './engine-watcher.js';
import { MOUNTS_IN_WORKSPACE } from './folder-mount-points.js';
import { HomeVolumes } from './home-volumes.js';
import { HostLock } from './host-lock.js';
import { HostProvisioning } from './host-provisioning.js';
import { buildImages } from './image-build.js';
import { imageStatuses, type RuntimeImages, requireImages, workspaceVariant } from './image-status.js';
import { readMemoryUse } from './memory-cgroup.js';
import { linkWorkspace, run, unlinkWorkspace, workspaceLinked } from './netns.js';
import { PathCheckProgram, pathCheckBudgetMs, verifyEgressPath } from './path-check.js';
import { delay, entrypointDone, sshBanner, tunnelReady, v2rayPid } from './readiness.js';
import { type RuntimeLog, StartTimings } from './start-timings.js';
import { guardUplink, releaseUplink } from './uplink-guard.js';
import { verifyAsWorkspaceUser } from './user-path-check.js';
import {
  type ExecResult,
  type ImageStatus,
  type MeteredTraffic,
  type ProgressReporter,
  type ResourceUsage,
  RuntimeError,
  type RuntimeNotice,
  type StartedWorkspace,
  startCancelled,
  type UpstreamSpec,
  UpstreamSwitchReverted,
  type WorkspaceEndpoints,
  type WorkspaceLimits,
  type WorkspaceRuntime,
  type WorkspaceSpec,
  type WorkspaceState,
} from './workspace-runtime.js';

export interface DockerWorkspaceRuntimeOptions {
  docker: Docker;
  /** Image tags (image/build.sh prints them; image-inputs.ts computes them). */
  images: RuntimeImages;
  /** The gateway's DATA_DIR: egress gateway configs and the workspaces' resolv.conf live under `runtime/`. */
  dataDir: string;
  /** config.egress: the endpoints the path check asks and the DNS the tunnel resolves with. */
  egress: EgressSettings;
  /** The tunnel program of the egress gateways. */
  engine: TunnelEngine;
  /** Node.js run inside a workspace's namespace for the path check; the gateway's own by default. */
  nodeCommand?: string;
  /**
   * This gateway's part of config.folderMounts.dir: a directory per host under it is bound into the workspace,
   * so that mounts made there appear inside. Absent, or where mounts do not propagate, hosts go without.
   */
  folderMountsDir?: string;
  /** Limits of each egress gateway container. */
  gatewayLimits?: { memoryMb: number; pids: number };
  /** Egress gateways started ahead (EGRESS_GATEWAY_POOL, EGRESS_GATEWAY_POOL_MAX); none by default. */
  egressPool?: { perUpstream: number; max: number };
  timeouts?: Partial<Timeouts>;
  /** Where each start's timing spans go, at debug level. */
  log?: RuntimeLog;
}

interface Timeouts {
  /** Container start until its process is ready (egress gateway: kill switch and v2ray; workspace: sshd). */
  readyMs: number;
  httpMs: number;
  dnsMs: number;
  /** Graceful stop before Docker kills a container. */
  stopSeconds: number;
}

const DEFAULT_TIMEOUTS: Timeouts = { readyMs: 15_000, httpMs: 10_000, dnsMs: 8_000, stopSeconds: 5 };

/** What a start made so far, so that a cancelled one can take it back. */
interface StartMade {
  volumes: string[];
  /** The workspace container, when this start made it (none was there, or one from another spec). */
  workspaceId: string | null;
}

interface ContainerFacts {
  id: string;
  running: boolean;
  /** Frozen by `freeze` (docker pause). */
  paused: boolean;
  pid: number;
  uplinkAddress: string | null;
  labels: Record<string, string>;
  /** The directory on this machine bound at the egress gateway's /etc/ccp-egress; null for other containers. */
  configDir: string | null;
  /** A workspace's Linux user (its WORKSPACE_USER), null for other containers. */
  user: string | null;
  /** The image name it was created from (tags carry the recipe's hash). */
  image: string;
  /** Its memory, CPU and process limits, as `workspaceLimitsConfig` writes them. */
  limits: ReturnType<typeof workspaceLimitsConfig>;
}

const GATEWAY_CONFIG_MOUNT = '/etc/ccp-egress';
const SSH_RETRY_MS = 20;
const SSH_INSPECT_EVERY = 10;
/** How often a workspace setting up at creation is looked at (from /proc, not Docker). */
const SET_UP_POLL_MS = 50;
const LINUX_USER = /^[a-z_][a-z0-9_-]{0,31}$/;
const WORKSPACE_USER_ENV = 'WORKSPACE_USER=';

/**
 * Workspaces on Docker, design (c) of spike-egress.md §12. Per host:
 *
 * - `ccp-egress-<hostId>`: the egress gateway (v2ray + nftables kill switch) on the `ccp-uplink` bridge, the
 *   only container with a way out;
 * - `ccp-ws-<hostId>`: the workspace, `--network none`: a veth pair made from the host links its namespace to
 *   the gateway's, with link-local addresses, its default route and its resolver on the gateway side;
 * - volumes `ccp-home-<hostId>` and `ccp-hostkeys-<hostId>`, which outlive both containers.
 *
 * The control plane reaches the workspace's sshd and desktop through a relay in the egress gateway
 * (egress-gateway-files.ts), from its own uplink address only. Every start and switch verifies the path from
 * inside the workspace's namespace (path-check.ts); a host that fails it is left stopped.
 */
export class DockerWorkspaceRuntime implements WorkspaceRuntime {
  private readonly docker: Docker;
  private readonly timeouts: Timeouts;
  private readonly plan: VerificationPlan;
  private readonly runtimeDir: string;
  private readonly owner: string;
  private readonly lock = new HostLock();
  /** Egress bytes read from gateways (before a stop or a switch) that the meter has not taken yet. */
  private readonly unreadTraffic = new Map<string, MeteredTraffic[]>();
  /** The rate `throttleEgress` set last on each host's gateway (by its process). */
  private readonly throttles = new Map<string, { pid: number; rate: number }>();
  private readonly provisioning: HostProvisioning;
  private readonly watcher: EngineWatcher;
  private readonly homes: HomeVolumes;
  private readonly pool: EgressGatewayPool;
  /**
   * New workspaces running, without a network, for their entrypoint's one-time set-up, by host: stopped once it is
   * done, unless a start took them over meanwhile.
   */
  private readonly settingUp = new Map<string, string>();
  /** Starts asked and waiting for their turn, by host. */
  private readonly startsWaiting = new Map<string, number>();
  /** Pooled gateways are started one at a time, after the start that wanted them (never beside one). */
  private poolWork: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: DockerWorkspaceRuntimeOptions) {
    this.docker = options.docker;
    this.timeouts = { ...DEFAULT_TIMEOUTS, ...options.timeouts };
    this.plan = verificationPlan(options.egress);
    this.runtimeDir = path.resolve(options.dataDir, 'runtime');
    this.owner = gatewayInstanceId(this.runtimeDir);
    this.homes = new HomeVolumes(path.join(this.runtimeDir, 'homes'));
    this.pool = new EgressGatewayPool({
      dir: path.join(this.runtimeDir, 'egress-pool'),
      perUpstream: options.egressPool?.perUpstream ?? 0,
      max: options.egressPool?.max ?? 0,
    });
    this.provisioning = new HostProvisioning({
      homes: this.homes,
      docker: this.docker,
      runtimeDir: this.runtimeDir,
      owner: this.owner,
      egress: options.egress,
      engine: options.engine,
      folderMountsDir: options.folderMountsDir,
    });
    this.watcher = new EngineWatcher({
      docker: this.docker,
      owner: this.owner,
      relink: (hostId) => this.relink(hostId),
      hostIds: () => this.hostIds(),
    });
  }

  imageTag(): string {
    return this.options.images.workspace;
  }

  async start(
    spec: WorkspaceSpec,
    upstream: UpstreamSpec,
    progress: ProgressReporter,
    signal?: AbortSignal,
  ): Promise<StartedWorkspace> {
    checkSpec(spec);
    this.countWaitingStart(spec.hostId, 1);
    try {
      return await this.lock.run(spec.hostId, () => {
        this.countWaitingStart(spec.hostId, -1);
        return this.startNow(spec, upstream, progress, signal);
      });
    } finally {
      // The next start with this upstream takes one ready; made once this one is done, not beside it.
      if (this.pool.enabled) this.queuePoolWork(() => this.fillPool(upstream, spec.egressPolicy ?? null));
    }
  }

  private countWaitingStart(hostId: string, change: 1 | -1): void {
    const count = (this.startsWaiting.get(hostId) ?? 0) + change;
    if (count > 0) this.startsWaiting.set(hostId, count);
    else this.startsWaiting.delete(hostId);
  }

  /** Resolves once the pool's work in hand is done: its gateways started ahead are ready (or failed). */
  async poolSettled(): Promise<void> {
    await this.poolWork;
  }

  async retireEgressGateways(egressIpId?: string): Promise<void> {
    const retired = this.pool.retire(egressIpId);
    // A gateway on its way for them is removed as it arrives: done once the pool's work in hand is.
    await this.poolWork;
    for (const entry of retired) await this.removePooled(entry);
    if (egressIpId) return;
    // All of them (start-up, shutdown): also those an earlier process of this gateway left, and their files.
    const containers = await this.docker.listContainers({
      all: true,
      filters: { label: [POOL_LABEL, `${OWNER_LABEL}=${this.owner}`] },
    });
    const inUse = new Set<string>();
    for (const container of containers) {
      const poolId = container.Names.map((name) => /^\/ccp-pool-(pool-[0-9a-f]+)$/.exec(name)?.[1]).find(
        Boolean,
      );
      const configDir = container.Mounts.find((mount) => mount.Destination === GATEWAY_CONFIG_MOUNT)?.Source;
      if (poolId) await this.removePooled({ id: poolId, containerId: container.Id, dir: configDir ?? '' });
      else if (configDir) inUse.add(configDir);
    }
    await this.pool.sweep(inUse);
  }

  /**
   * Makes a new host's workspace and runs it once, without a network, until its entrypoint has created the user,
   * filled the home and made the host key: its first start is then like every later one. A start already waiting
   * when the container is made does the set-up itself; one asked during the set-up takes the running workspace
   * over instead of waiting for it.
   */
  async prepare(spec: WorkspaceSpec): Promise<void> {
    checkSpec(spec);
    const settingUp = await this.lock.run(spec.hostId, () =>
      this.guard(async () => {
        await requireImages(this.docker, this.options.images);
        await this.provisioning.ensureVolumes(spec.hostId, spec.limits.homeMb);
        const id = await this.prepareWorkspace(spec);
        // A start already asked does the set-up itself, with the egress gateway's start beside it.
        if (this.startsWaiting.has(spec.hostId) || !(await this.neverStarted(id))) return null;
        const facts = await this.startContainer(id);
        this.settingUp.set(spec.hostId, id);
        return facts;
      }),
    );
    if (settingUp) await this.finishSetUp(spec.hostId, settingUp);
  }

  async stop(hostId: string): Promise<void> {
    checkHostId(hostId);
    return this.lock.run(hostId, () => this.guard(() => this.stopNow(hostId)));
  }

  async rebuild(
    spec: WorkspaceSpec,
    upstream: UpstreamSpec | null,
    progress: ProgressReporter,
  ): Promise<void> {
    checkSpec(spec);
    return this.lock.run(spec.hostId, () =>
      this.guard(async () => {
        await progress(5, 'checking the images');
        await requireImages(this.docker, this.options.images);
        await progress(10, 'removing the old workspace container');
        const old = await this.find(spec.hostId, 'workspace');
        if (old) await this.docker.getContainer(old.id).remove({ force: true, v: true });
        if (upstream) {
          await this.startNow(spec, upstream, progress);
          return;
        }
        // A host that was not running stays stopped, with its new container ready for the next start.
        await this.stopNow(spec.hostId);
        await progress(50, 'creating the workspace container');
        await this.provisioning.ensureVolumes(spec.hostId, spec.limits.homeMb);
        const id = await this.prepareWorkspace(spec);
        // Set up as at creation (without a network), so that the next start is as quick as every later one.
        await progress(70, 'setting the user up in the new container');
        await this.waitForSetUp(await this.startContainer(id));
        await this.stopSetUp(id);
        await progress(100, 'rebuilt');
      }),
    );
  }

  async remove(hostId: string): Promise<void> {
    checkHostId(hostId);
    return this.lock.run(hostId, () =>
      this.guard(async () => {
        const filters = { label: [`${HOST_LABEL}=${hostId}`] };
        // A gateway it took from the pool carries no host label: found by its name.
        const gateway = await this.find(hostId, 'egress-gateway');
        if (gateway) await this.removeGateway(gateway);
        // The veth pair lives only in the two containers' namespaces and goes with them.
        for (const container of await this.docker.listContainers({ all: true, filters })) {
          await this.docker
            .getContainer(container.Id)
            .remove({ force: true, v: true })
            .catch(ignoreStatus(404));
        }
        const { Volumes } = await this.docker.listVolumes({ filters });
        for (const volume of Volumes ?? []) {
          await this.docker.getVolume(volume.Name).remove().catch(ignoreStatus(404));
        }
        await releaseUplink(hostId);
        await this.homes.remove(hostId);
        await rm(this.provisioning.gatewayDir(hostId), { recursive: true, force: true });
        await this.pool.forgetLinksTo(this.provisioning.gatewayDir(hostId));
        // rmdir, never a recursive removal: a live folder mount there holds the user's own files.
        const mounts = this.options.folderMountsDir;
        if (mounts) await rmdir(path.join(mounts, hostId)).catch(() => {});
      }),
    );
  }

  async switchUpstream(hostId: string, upstream: UpstreamSpec, fallback: UpstreamSpec | null): Promise<void> {
    checkHostId(hostId);
    return this.lock.run(hostId, () =>
      this.guard(async () => {
        const found = await this.find(hostId, 'egress-gateway');
        const workspace = await this.find(hostId, 'workspace');
        if (!found?.running || !workspace?.running)
          throw new RuntimeError('not_running', `host ${hostId} is not running`);
        let gateway = found;
        const { hostAddress } = await this.provisioning.ensureUplink();
        const apply = async (target: UpstreamSpec) => {
          const serverIp = await resolveServer(target.config.server);
          await this.provisioning.writeGatewayFiles(hostId, target, serverIp, hostAddress);
          if (gateway.image === this.options.images.egressGateway) {
            // The host's guard first: until v2ray restarts, the old upstream is refused by both.
            await this.guardUplink(hostId, gateway);
            // What the old upstream carried is read before the restart clears v2ray's counters.
            await this.keepEgressTraffic(hostId, gateway.pid, fallback?.egressIpId ?? null);
            const before = await v2rayPid(gateway.pid);
            // The entrypoint reloads the ruleset (one nft transaction) and restarts v2ray: while v2ray is down
            // the TPROXY rules find no socket and the packets are dropped; nothing else may leave. The relay
            // into the workspace is not v2ray's, so open sessions stay.
            // Sent to the container's init (tini, which hands it to the entrypoint) straight, not through
            // Docker's kill: Docker takes any signal it sends as a manual stop, and an `unless-stopped` container
            // so marked is not started again when dockerd restarts (the host would be left without its gateway).
            process.kill(gateway.pid, 'SIGHUP');
            gateway = await this.waitForGateway(gateway.id, before);
          } else {
            // A gateway made from an older recipe (this gateway was upgraded while the host ran) may lack what
            // today's files expect, such as the relay: it is replaced, which ends open sessions this once.
            await unlinkWorkspace(gateway.pid);
            gateway = await this.waitForGateway(await this.recreateGateway(hostId), null);
            await this.guardUplink(hostId, gateway);
            await linkWorkspace(gateway.pid, workspace.pid);
          }
          await verifyEgressPath(
            {
              workspacePid: workspace.pid,
              gatewayPid: gateway.pid,
              exitIp: target.exitIp,
              uplinkHostAddress: hostAddress,
            },
            this.plan,
            this.checkOptions(),
          );
          if (workspace.user) await this.verifyAsUser(workspace.id, workspace.user, target.exitIp);
        };
        try {
          await apply(upstream);
        } catch (error) {
          const failure = asRuntimeError(error);
          // The way back is checked like the way there: a host never runs on an unverified path.
          const reverted =
            fallback !== null &&
            (await apply(fallback).then(
              () => true,
              () => false,
            ));
          if (reverted) throw new UpstreamSwitchReverted(failure);
          await this.stopNow(hostId).catch(() => undefined);
          throw failure;
        }
      }),
    );
  }

  async applyEgressPolicy(
    hostId: string,
    upstream: UpstreamSpec,
    policy: EgressPolicy | null,
  ): Promise<void> {
    checkHostId(hostId);
    return this.lock.run(hostId, () =>
      this.guard(async () => {
        const gateway = await this.find(hostId, 'egress-gateway');
        const workspace = await this.find(hostId, 'workspace');
        if (!gateway?.running || !workspace?.running)
          throw new RuntimeError('not_running', `host ${hostId} is not running`);
        // An older entrypoint knows no DNS filter: its workspace would be left without a resolver.
        if (gateway.image !== this.options.images.egressGateway)
          throw new RuntimeError(
            'egress_gateway_outdated',
            'its egress gateway was made from an older image; the policy applies from its next start',
          );
        const { hostAddress } = await this.provisioning.ensureUplink();
        const serverIp = await resolveServer(upstream.config.server);
        await this.provisioning.writeGatewayFiles(hostId, upstream, serverIp, hostAddress, policy);
        // The restart clears v2ray's counters: what they hold is kept first.
        await this.keepEgressTraffic(hostId, gateway.pid, null);
        const before = await v2rayPid(gateway.pid);
        // As for a switch of upstream (above): the entrypoint reloads the same kill switch and restarts v2ray and
        // the DNS filter; while they are down the workspace's packets are dropped. The relay is left alone.
        process.kill(gateway.pid, 'SIGHUP');
        await this.waitForGateway(gateway.id, before);
      }),
    );
  }

  async state(hostId: string): Promise<WorkspaceState> {
    checkHostId(hostId);
    return this.guard(async () => {
      const workspace = await this.find(hostId, 'workspace');
      const gateway = await this.find(hostId, 'egress-gateway');
      if (!workspace) return gateway ? 'broken' : 'missing';
      if (!workspace.running && !gateway?.running) return 'stopped';
      if (workspace.running && gateway?.running && (await workspaceLinked(workspace.pid, gateway.pid)))
        return 'running';
      return 'broken';
    });
  }

  async resize(hostId: string, limits: WorkspaceLimits): Promise<'now' | 'next_start'> {
    checkHostId(hostId);
    checkLimits(limits);
    return this.lock.run(hostId, () =>
      this.guard(async () => {
        const size = await this.homes.sizeMb(hostId);
        if (size !== null && limits.homeMb < size)
          throw new RuntimeError(
            'home_shrink',
            `the home is ${size} MiB and is never shrunk (its files would not fit); give ${size} MiB or more`,
          );
        const workspace = await this.find(hostId, 'workspace');
        if (workspace) await this.updateLimits(workspace.id, limits);
        return size === null || (await this.homes.grow(hostId, limits.homeMb)) ? 'now' : 'next_start';
      }),
    );
  }

  homeSizeMb(hostId: string): Promise<number | null> {
    checkHostId(hostId);
    return this.homes.sizeMb(hostId);
  }

  async usage(hostId: string): Promise<ResourceUsage | null> {
    checkHostId(hostId);
    return this.guard(async () => {
      const workspace = await this.find(hostId, 'workspace');
      if (!workspace?.running) return null;
      return { memory: await readMemoryUse(workspace.pid), home: await this.homes.usage(hostId) };
    });
  }

  /** Memory, CPUs and processes of a container, in place (running or not). */
  private async updateLimits(containerId: string, limits: WorkspaceLimits): Promise<void> {
    try {
      await this.docker.getContainer(containerId).update(workspaceLimitsConfig(limits));
    } catch (error) {
      const message = (error as { json?: { message?: string } }).json?.message ?? (error as Error).message;
      throw new RuntimeError('resize_refused', `the engine refused the new limits: ${message}`);
    }
  }

  async endpoints(hostId: string): Promise<WorkspaceEndpoints | null> {
    checkHostId(hostId);
    return this.guard(async () => {
      const gateway = await this.find(hostId, 'egress-gateway');
      return gateway?.running && gateway.uplinkAddress ? endpointsAt(gateway.uplinkAddress) : null;
    });
  }

  async folderMountDir(hostId: string): Promise<string | null> {
    checkHostId(hostId);
    return this.guard(async () => {
      const workspace = await this.find(hostId, 'workspace');
      if (!workspace?.running) return null;
      const info = await this.docker.getContainer(workspace.id).inspect();
      return info.Mounts.find((mount) => mount.Destination === MOUNTS_IN_WORKSPACE)?.Source ?? null;
    });
  }

  async takeEgressTraffic(hostId: string): Promise<MeteredTraffic[]> {
    checkHostId(hostId);
    // Without the host's lock, so a long start does not hold up the meter: v2ray hands out and resets its
    // counters in one call, so a stop reading them at the same time gets the bytes this call does not.
    return this.guard(async () => {
      const gateway = await this.find(hostId, 'egress-gateway');
      if (gateway?.running) await this.keepEgressTraffic(hostId, gateway.pid, null);
      const taken = this.unreadTraffic.get(hostId) ?? [];
      this.unreadTraffic.delete(hostId);
      return taken;
    });
  }

  async takeEgressDecisions(hostId: string): Promise<ReadDecisions> {
    checkHostId(hostId);
    const none: ReadDecisions = { counts: [], refused: 0, overflowed: false };
    return this.guard(async () => {
      const gateway = await this.find(hostId, 'egress-gateway');
      if (!gateway?.running) return none;
      const { engine } = this.options;
      // What the tunnel decided, and the names the DNS filter refused (written as the tunnel's lines).
      const logs = [engine.decisionLogPath, DNS_REFUSAL_LOG_PATH]
        .map((file) => takeDecisionLog(gateway.pid, file))
        .filter((log) => log !== null);
      if (logs.length === 0) return none;
      const text = logs.map((log) => log.text).join('\n');
      return { ...engine.parseDecisions(text, new Date()), overflowed: logs.some((log) => log.overflowed) };
    });
  }

  /**
   * Reads (and so resets) the gateway's counters into `unreadTraffic`, before a stop or a switch takes them
   * away. A gateway whose v2ray is restarting answers nothing: what it had counted went with it.
   */
  private async keepEgressTraffic(hostId: string, gatewayPid: number, egressIpId: string | null) {
    const { engine } = this.options;
    const [program, ...args] = engine.counterCommand(GATEWAY_NETWORK.countersPort);
    const read = await run(
      'nsenter',
      [`--net=/proc/${gatewayPid}/ns/net`, `--mount=/proc/${gatewayPid}/ns/mnt`, '--', program!, ...args],
      { timeoutMs: 5000 },
    ).catch(() => null);
    if (!read) return;
    const counted = engine.parseCounters(read.stdout);
    if (counted.sent === 0 && counted.received === 0) return;
    const kept = this.unreadTraffic.get(hostId) ?? [];
    const same = kept.find((entry) => entry.egressIpId === egressIpId);
    if (same) {
      same.sent += counted.sent;
      same.received += counted.received;
    } else kept.push({ egressIpId, ...counted });
    this.unreadTraffic.set(hostId, kept);
  }

  async throttleEgress(hostId: string, bytesPerSecond: number | null): Promise<boolean> {
    checkHostId(hostId);
    // Without the host's lock, like the meter: the budget round must not wait for a long start.
    return this.guard(async () => {
      const gateway = await this.find(hostId, 'egress-gateway');
      if (!gateway?.running) return false;
      const applied = this.throttles.get(hostId);
      await throttleGateway(gateway.pid, bytesPerSecond, applied?.pid === gateway.pid ? applied.rate : null);
      if (bytesPerSecond === null) this.throttles.delete(hostId);
      else this.throttles.set(hostId, { pid: gateway.pid, rate: bytesPerSecond });
      return true;
    });
  }

  async freeze(hostId: string, frozen: boolean): Promise<boolean> {
    checkHostId(hostId);
    return this.guard(async () => {
      const workspace = await this.find(hostId, 'workspace');
      if (!workspace?.running) return false;
      if (workspace.paused === frozen) return true;
      const container = this.docker.getContainer(workspace.id);
      await (frozen ? container.pause() : container.unpause());
      return true;
    });
  }

  async exec(hostId: string, command: string[], timeoutMs: number): Promise<ExecResult | null> {
    checkHostId(hostId);
    return this.guard(async () => {
      const workspace = await this.find(hostId, 'workspace');
      if (!workspace?.running) return null;
      return execCapped(this.docker, workspace.id, command, timeoutMs);
    });
  }

  hostIds(): Promise<string[]> {
    return this.guard(async () => {
      const filters = { label: [HOST_LABEL, `${OWNER_LABEL}=${this.owner}`] };
      const containers = await this.docker.listContainers({ all: true, filters });
      const { Volumes } = await this.docker.listVolumes({ filters });
      const ids = [
        ...containers.map((container) => container.Labels[HOST_LABEL]),
        ...(Volumes ?? []).map((volume) => volume.Labels?.[HOST_LABEL]),
      ];
      return [...new Set(ids.filter((id): id is string => typeof id === 'string'))].sort();
    });
  }

  watch(
    onError: (error: unknown) => void = () => {},
    onNotice: (notice: RuntimeNotice) => void = () => {},
  ): () => void {
    return this.watcher.watch(onError, onNotice);
  }

  // ------------------------------------------------------------------ lifecycle steps

  private async startNow(
    spec: WorkspaceSpec,
    upstream: UpstreamSpec,
    progress: ProgressReporter,
    signal?: AbortSignal,
  ): Promise<StartedWorkspace> {
    // Cancelled while waiting for its turn: nothing was touched yet.
    if (signal?.aborted) throw startCancelled();
    // A workspace still setting up at creation is this start's now (it has no network until the link).
    this.settingUp.delete(spec.hostId);
    const timings = new StartTimings();
    const span = timings.span.bind(timings);
    const made: StartMade = { volumes: [], workspaceId: null };
    // The path check's program, once the workspace's namespace exists.
    const ahead: { program?: PathCheckProgram } = {};
    const step = async (percent: number, stage: string) => {
      if (signal?.aborted) throw startCancelled();
      await progress(percent, stage);
    };
    try {
      await step(5, 'checking the images');
      await span('images', () => requireImages(this.docker, this.options.images));
      await step(10, `resolving the upstream ${upstream.config.server}`);
      const serverIp = await span('resolve upstream', () => resolveServer(upstream.config.server, signal));
      await step(15, 'preparing the volumes and the uplink network');
      const { hostAddress } = await span('uplink network', () => this.provisioning.ensureUplink());
      made.volumes = await span('volumes', () =>
        this.provisioning.ensureVolumes(spec.hostId, spec.limits.homeMb),
      );
      const policy = spec.egressPolicy ?? null;
      const files = this.provisioning.renderGatewayFiles(upstream, serverIp, hostAddress, policy);
      const taken = this.pool.take(gatewayFilesKey(files, this.options.images.egressGateway));
      await step(25, 'starting the egress gateway and the workspace');
      const previousWorkspace = (await this.find(spec.hostId, 'workspace'))?.id;
      // Side by side: the workspace has no network at all until it is linked, after the gateway is ready.
      // Both are awaited even when one fails, so the clean-up below cannot miss a container still starting.
      const [gateway, workspace] = await span('containers', () =>
        settleAll([
          this.readyGateway(spec.hostId, files, policy, taken, timings, signal),
          span('workspace: create', () => this.prepareWorkspace(spec)).then(async (id) => {
            if (id !== previousWorkspace) made.workspaceId = id;
            const starting = span('workspace: start', () => this.startContainer(id));
            // The path check's program gets ready while the gateway does, in the workspace's namespace as soon
            // as runc has made it (40-50 ms before Docker's start returns), so that it has loaded, or nearly, when
            // the link is made. A namespace seen early is used only if it is the started workspace's own.
            const early = await span('workspace: namespace seen', () => watchNetns(id, starting));
            if (early) ahead.program = this.pathCheckProgram(early.path, signal, early);
            const started = await starting;
            if (!early?.holds(started.pid)) {
              ahead.program?.discard();
              ahead.program = this.pathCheckProgram(`/proc/${started.pid}/ns/net`, signal);
            }
            return started;
          }),
        ]),
      );
      await step(60, 'linking the workspace to its egress gateway');
      if (!gateway.uplinkAddress)
        throw new RuntimeError('network_setup_failed', 'the egress gateway has no uplink address');
      await span('link', () => linkWorkspace(gateway.pid, workspace.pid));
      await step(
        70,
        `verifying the path through ${upstream.label} (${upstream.exitIp}), and as ${spec.linuxUser} once sshd answers`,
      );
      const endpoints = endpointsAt(gateway.uplinkAddress);
      // Side by side: the path as root sees it (the canary's window included), the check as the user, and sshd
      // (which also proves the relay). The path's verdict comes first whatever the others say.
      const pathChecked = span('path check', () =>
        verifyEgressPath(
          {
            workspacePid: workspace.pid,
            gatewayPid: gateway.pid,
            exitIp: upstream.exitIp,
            uplinkHostAddress: hostAddress,
          },
          this.plan,
          { ...this.checkOptions(), signal, timings, program: ahead.program },
        ),
      );
      // By number: the entrypoint may not have added the user's name yet; the uid and group the user logs in with
      // (its other groups only ever add access).
      const userChecked = span('user check', () =>
        this.verifyAsUser(workspace.id, spec.linuxUser, upstream.exitIp, `${WORKSPACE_UID}:${WORKSPACE_UID}`),
      );
      const sshdAnswered = span('sshd', () => this.waitForSsh(endpoints.ssh.host, workspace.id, signal));
      userChecked.catch(() => {});
      sshdAnswered.catch(() => {});
      const { echoesOut } = await pathChecked;
      await userChecked;
      await sshdAnswered;
      const out = echoesOut.length > 0 ? `; IP echoes out: ${echoesOut.join(', ')}` : '';
      const took = timings.elapsedMs();
      this.options.log?.debug({ hostId: spec.hostId, ms: took, spans: timings.spans }, 'host started');
      await progress(100, `running through ${upstream.label}, verified in ${Math.round(took)} ms${out}`);
      this.releaseDesktop(workspace.id);
      return { ...endpoints, echoesOut };
    } catch (error) {
      ahead.program?.discard();
      this.options.log?.debug(
        { hostId: spec.hostId, ms: timings.elapsedMs(), spans: timings.spans },
        'host start failed',
      );
      if (signal?.aborted) {
        await this.undoStart(spec.hostId, made);
        throw startCancelled();
      }
      // Never half-running: whatever failed, both containers end up stopped.
      await this.stopNow(spec.hostId).catch(() => undefined);
      throw asRuntimeError(error);
    }
  }

  /**
   * After a cancelled start: what it made goes (the egress gateway, made anew by every start, with its files; a
   * new workspace container; new volumes), what was there before is stopped. A first start leaves nothing.
   */
  private async undoStart(hostId: string, made: StartMade): Promise<void> {
    const gateway = await this.find(hostId, 'egress-gateway');
    if (gateway) await this.removeGateway(gateway);
    await releaseUplink(hostId);
    if (made.workspaceId) await this.removeContainer(made.workspaceId);
    else await this.stopNow(hostId);
    for (const volume of made.volumes) await this.docker.getVolume(volume).remove().catch(ignoreStatus(404));
    if (made.volumes.includes(homeVolume(hostId))) await this.homes.remove(hostId);
    await rm(this.provisioning.gatewayDir(hostId), { recursive: true, force: true });
    const mounts = this.options.folderMountsDir;
    if (made.workspaceId && mounts) await rmdir(path.join(mounts, hostId)).catch(() => {});
  }

  private async removeContainer(id: string): Promise<void> {
    await this.docker.getContainer(id).remove({ force: true, v: true }).catch(ignoreStatus(404));
  }

  private async stopNow(hostId: string): Promise<void> {
    // The workspace first, so it never runs without its gateway.
    for (const role of ['workspace', 'egress-gateway'] as const) {
      const container = await this.find(hostId, role);
      if (container?.running) {
        if (role === 'egress-gateway') await this.keepEgressTraffic(hostId, container.pid, null);
        // A frozen workspace would not hear the stop signal until killed.
        if (container.paused) await this.docker.getContainer(container.id).unpause().catch(ignoreStatus(409));
        await this.docker
          .getContainer(container.id)
          .stop({ t: this.timeouts.stopSeconds })
          .catch(ignoreStatus(304, 404));
      }
    }
    await releaseUplink(hostId);
    // Mounted again at the next start, and grown then if its size was raised meanwhile.
    await this.homes.unmount(hostId).catch(() => undefined);
  }

  private async relink(hostId: string): Promise<void> {
    await this.lock.run(hostId, async () => {
      const workspace = await this.find(hostId, 'workspace');
      const gateway = await this.find(hostId, 'egress-gateway');
      if (!workspace?.running || !gateway?.running || (await workspaceLinked(workspace.pid, gateway.pid)))
        return;
      // Linking waits for the gateway's kill switch and v2ray, as at start.
      const ready = await this.waitForGateway(gateway.id, null);
      // A gateway Docker started again has a new port on the uplink, unguarded until now.
      await this.guardUplink(hostId, ready);
      await linkWorkspace(ready.pid, workspace.pid);
      this.releaseDesktop(workspace.id);
    });
  }

  /**
   * Lets the workspace's desktop come up (`ccp-desktop start`): its supervisor waits for this, so that the
   * desktop's own start-up (X server, fonts, window manager, a terminal and its shell) does not take the CPU the
   * start's checks need. Not awaited. An image without a desktop answers 126 or 127; a supervisor that never
   * hears it brings the desktop up on its own after a while.
   */
  private releaseDesktop(workspaceId: string): void {
    execCapped(this.docker, workspaceId, [DESKTOP_CONTROL, 'start'], DESKTOP_CONTROL_TIMEOUT_MS).catch(
      (error: unknown) =>
        this.options.log?.debug({ workspaceId, error: String(error) }, 'the desktop was not released'),
    );
  }

  /** The host-side guard on the gateway's uplink port (uplink-guard.ts), with the policy its files were written with. */
  private async guardUplink(hostId: string, gateway: ContainerFacts): Promise<void> {
    const policy = await this.provisioning.readUplinkPolicy(hostId);
    if (!gateway.uplinkAddress || !policy)
      throw new RuntimeError(
        'network_setup_failed',
        gateway.uplinkAddress
          ? 'the egress gateway has no uplink policy: start the host again'
          : 'the egress gateway has no uplink address',
      );
    await guardUplink(hostId, { pid: gateway.pid, uplinkAddress: gateway.uplinkAddress }, policy);
  }

  // ------------------------------------------------------------------ containers

  /**
   * The host's egress gateway for this start, ready (kill switch loaded, v2ray listening) with its uplink port
   * guarded: one taken from the pool when `taken` is still as it was made, else a new one with `files`.
   */
  private async readyGateway(
    hostId: string,
    files: EgressGatewayFiles,
    policy: EgressPolicy | null,
    taken: PooledGateway | null,
    timings: StartTimings,
    signal?: AbortSignal,
  ): Promise<ContainerFacts> {
    const span = timings.span.bind(timings);
    if (taken) {
      const claimed = await span('gateway: take a pooled one', () => this.claimPooled(hostId, taken, files));
      if (claimed) return claimed;
    }
    await span('gateway files', () =>
      this.provisioning.writeFilesTo(this.provisioning.gatewayDir(hostId), files, policy),
    );
    const id = await this.recreateGateway(hostId, timings);
    // The host's guard on its uplink goes on as soon as the gateway's port exists, while the gateway loads
    // its kill switch and the workspace starts: before any link, off the start's critical path.
    const [ready, guarded] = await Promise.allSettled([
      span('gateway: kill switch and v2ray ready', () => this.waitForGateway(id, null, signal)),
      span('gateway: uplink guard', () =>
        this.inspect(id).then((started) =>
          started ? this.guardUplink(hostId, started) : Promise.reject(new Error('gone')),
        ),
      ),
    ]);
    // A gateway that did not come up says why in its own words, not the guard's.
    if (ready.status === 'rejected') throw ready.reason;
    if (guarded.status === 'rejected') throw guarded.reason;
    return ready.value;
  }

  /**
   * Makes a pooled gateway the host's: checked to be the very process that became ready and was guarded in the
   * pool (null when it is not: it is removed and the start makes its own), renamed, its files moved to the
   * host's directory, guarded under the host's name (the same policy as in the pool: the files are the same)
   * and restarted by dockerd like any host's gateway, all side by side. No workspace was ever linked to it, so
   * it carries nothing of another host: no connection, no DNS answer, no byte on its counters.
   */
  private async claimPooled(
    hostId: string,
    entry: PooledGateway,
    files: EgressGatewayFiles,
  ): Promise<ContainerFacts | null> {
    const facts = await this.inspect(entry.containerId);
    const uplinkAddress = facts?.uplinkAddress;
    if (
      !facts?.running ||
      facts.pid !== entry.pid ||
      !uplinkAddress ||
      !(await tunnelReady(facts.pid, null))
    ) {
      await this.removePooled(entry).catch(() => undefined);
      return null;
    }
    const container = this.docker.getContainer(entry.containerId);
    await Promise.all([
      guardUplink(hostId, { pid: facts.pid, uplinkAddress }, files.uplink),
      container.update({ RestartPolicy: EGRESS_GATEWAY_RESTART }),
      (async () => {
        const old = await this.find(hostId, 'egress-gateway');
        if (old) await this.removeGateway(old);
        await this.pool.handOver(entry, this.provisioning.gatewayDir(hostId));
        await container.rename({ name: egressGatewayName(hostId) });
      })(),
    ]);
    // The pool's guard holds the same policy as the host's: it goes after the start, off its path.
    this.queuePoolWork(() => releaseUplink(entry.id));
    return { ...facts, configDir: this.provisioning.gatewayDir(hostId) };
  }

  /**
   * One pooled gateway for this upstream and egress policy, and more until the pool has what it may hold of it
   * (a host following another policy takes none of them: its files differ).
   */
  private async fillPool(upstream: UpstreamSpec, policy: EgressPolicy | null): Promise<void> {
    const serverIp = await resolveServer(upstream.config.server);
    const { hostAddress } = await this.provisioning.ensureUplink();
    const files = this.provisioning.renderGatewayFiles(upstream, serverIp, hostAddress, policy);
    const filesKey = gatewayFilesKey(files, this.options.images.egressGateway);
    // Those made for what this upstream was before (fills run one after another, so none is on its way).
    for (const old of this.pool.stale(upstream.egressIpId, filesKey)) await this.removePooled(old);
    while (this.pool.wanted(filesKey) > 0) {
      const { entry, generation } = this.pool.begin(upstream.egressIpId, filesKey);
      const ready = await this.startPooled(entry, files, policy).catch((error: unknown) => {
        this.pool.settle(filesKey, generation, null);
        throw error;
      });
      // Its upstream was retired while it started: it goes, and so does the rest of this fill.
      if (!this.pool.settle(filesKey, generation, ready)) return this.removePooled(ready);
    }
  }

  /** Starts a pooled gateway and waits until it is ready and guarded; on failure, nothing of it is left. */
  private async startPooled(
    entry: Omit<PooledGateway, 'containerId' | 'pid'>,
    files: EgressGatewayFiles,
    policy: EgressPolicy | null,
  ): Promise<PooledGateway> {
    let containerId = '';
    try {
      await this.provisioning.writeFilesTo(entry.dir, files, policy);
      const container = await this.docker.createContainer(
        egressGatewayContainer({
          for: { pool: { id: entry.id, egressIpId: entry.egressIpId, filesKey: entry.filesKey } },
          image: this.options.images.egressGateway,
          owner: this.owner,
          configDir: entry.dir,
          caFile: await this.caCopy(),
          limits: this.options.gatewayLimits ?? EGRESS_GATEWAY_LIMITS,
        }),
      );
      containerId = container.id;
      await container.start();
      const facts = await this.waitForGateway(container.id, null);
      if (!facts.uplinkAddress) throw new Error('the pooled egress gateway has no uplink address');
      await guardUplink(entry.id, { pid: facts.pid, uplinkAddress: facts.uplinkAddress }, files.uplink);
      return { ...entry, containerId, pid: facts.pid };
    } catch (error) {
      if (containerId) await this.removePooled({ ...entry, containerId }).catch(() => undefined);
      else await this.pool.forget(entry.dir);
      throw error;
    }
  }

  /** Removes a pooled gateway never taken: its container, its guard, its files. */
  private async removePooled(entry: Pick<PooledGateway, 'id' | 'containerId' | 'dir'>): Promise<void> {
    await this.removeContainer(entry.containerId);
    await releaseUplink(entry.id);
    if (entry.dir) await this.pool.forget(entry.dir);
  }

  /** Removes a host's egress gateway, and the link its pool path holds when it was a pooled one. */
  private async removeGateway(gateway: ContainerFacts): Promise<void> {
    await this.docker.getContainer(gateway.id).remove({ force: true, v: true }).catch(ignoreStatus(404));
    if (gateway.configDir && gateway.labels[POOL_LABEL]) await this.pool.forget(gateway.configDir);
  }

  private queuePoolWork(work: () => Promise<void>): void {
    this.poolWork = this.poolWork
      .then(work)
      .catch((error: unknown) =>
        this.options.log?.debug({ err: error }, 'the egress gateway pool: a step failed'),
      );
  }

  private caCopy(): Promise<string | undefined> {
    const { caFile } = this.options.egress;
    return caFile ? this.provisioning.ensureCaCopy(caFile) : Promise.resolve(undefined);
  }

  private async recreateGateway(hostId: string, timings?: StartTimings): Promise<string> {
    const span = <T>(name: string, work: () => Promise<T>) =>
      timings ? timings.span(`gateway: ${name}`, work) : work();
    // A fresh gateway every start: its namespace, ruleset and image are then exactly the current ones.
    const old = await this.find(hostId, 'egress-gateway');
    if (old) await span('remove the old one', () => this.removeGateway(old));
    const caFile = await this.caCopy();
    const container = await span('create', () =>
      this.docker.createContainer(
        egressGatewayContainer({
          for: { hostId },
          image: this.options.images.egressGateway,
          owner: this.owner,
          configDir: this.provisioning.gatewayDir(hostId),
          caFile,
          limits: this.options.gatewayLimits ?? EGRESS_GATEWAY_LIMITS,
        }),
      ),
    );
    await span('start', () => container.start());
    return container.id;
  }

  /**
   * The workspace container, made when missing or made from another spec; its volumes (made by the caller) are
   * kept either way. A newer image alone does not replace it (what users installed outside their home stays
   * until a rebuild).
   */
  private async prepareWorkspace(spec: WorkspaceSpec): Promise<string> {
    const [resolvConf, mountsDir, existing] = await Promise.all([
      this.provisioning.ensureResolvConf(),
      this.provisioning.prepareFolderMountsDir(spec.hostId),
      this.find(spec.hostId, 'workspace'),
    ]);
    if (
      existing?.labels[SPEC_LABEL] === workspaceSpecHash(spec, mountsDir) &&
      existing.labels[OWNER_LABEL] === this.owner
    ) {
      // Asked of the engine only when they changed: on a start's critical path.
      if (!isDeepStrictEqual(existing.limits, workspaceLimitsConfig(spec.limits)))
        await this.updateLimits(existing.id, spec.limits);
      return existing.id;
    }
    if (existing) await this.docker.getContainer(existing.id).remove({ force: true, v: true });
    const container = await this.docker.createContainer(
      workspaceContainer({
        spec,
        image: this.options.images.workspace,
        owner: this.owner,
        resolvConf,
        mountsDir,
      }),
    );
    // Before it starts: the desktop's supervisor reads it when it starts the VNC server.
    await container.putArchive(desktopPasswordArchive(spec.desktopPassword), { path: '/' });
    return container.id;
  }

  private async neverStarted(id: string): Promise<boolean> {
    // Docker's zero time (year 1) until the first start.
    const { State } = await this.docker.getContainer(id).inspect();
    return !(Date.parse(State.StartedAt) > 0);
  }

  /** Once the entrypoint of a workspace started by `prepare` is past its set-up: stopped, unless a start took it. */
  private async finishSetUp(hostId: string, workspace: ContainerFacts): Promise<void> {
    await this.waitForSetUp(workspace);
    await this.lock.run(hostId, () =>
      this.guard(async () => {
        if (this.settingUp.get(hostId) !== workspace.id) return;
        this.settingUp.delete(hostId);
        await this.stopSetUp(workspace.id);
      }),
    );
  }

  /** Until the entrypoint is past its set-up (or its container ended), within the ready timeout. */
  private async waitForSetUp(workspace: ContainerFacts): Promise<void> {
    const until = Date.now() + this.timeouts.readyMs;
    while (Date.now() < until && !(await entrypointDone(workspace.pid))) await delay(SET_UP_POLL_MS);
  }

  private async stopSetUp(id: string): Promise<void> {
    await this.docker.getContainer(id).stop({ t: this.timeouts.stopSeconds }).catch(ignoreStatus(304, 404));
  }

  private async startContainer(id: string): Promise<ContainerFacts> {
    await this.docker.getContainer(id).start().catch(ignoreStatus(304));
    const facts = await this.inspect(id);
    if (!facts?.running)
      throw new RuntimeError('workspace_failed', await this.exitReport(id, 'the workspace'));
    return facts;
  }

  /**
   * Until the egress gateway's entrypoint has loaded the kill switch and v2ray listens (a new v2ray, when
   * `previousV2ray` is given). Only then may a workspace be linked to it.
   */
  private async waitForGateway(
    id: string,
    previousV2ray: number | null,
    signal?: AbortSignal,
  ): Promise<ContainerFacts> {
    const until = Date.now() + this.timeouts.readyMs;
    let facts = await this.inspect(id);
    while (Date.now() < until) {
      if (signal?.aborted) throw startCancelled();
      if (!facts?.running) break;
      if (await tunnelReady(facts.pid, previousV2ray)) return facts;
      await delay(20);
      // Docker is asked again only when the process is gone (exited, or restarted under another pid): it is busy
      // starting the workspace meanwhile.
      if (!existsSync(`/proc/${facts.pid}`)) facts = await this.inspect(id);
    }
    throw new RuntimeError('egress_gateway_failed', await this.exitReport(id, 'the egress gateway'));
  }

  /** Until the workspace's sshd greets through the relay, i.e. from where the SSH proxy will connect. */
  private async waitForSsh(host: string, workspaceId: string, signal?: AbortSignal): Promise<void> {
    const until = Date.now() + this.timeouts.readyMs;
    for (let attempt = 1; Date.now() < until; attempt++) {
      if (signal?.aborted) throw startCancelled();
      if (await sshBanner(host, WORKSPACE_PORTS.ssh)) return;
      // Asked often (sshd comes up while the checks run beside), Docker only every tenth time: a workspace that
      // died is still noticed within a fifth of a second.
      if (attempt % SSH_INSPECT_EVERY === 0) {
        const facts = await this.inspect(workspaceId);
        if (!facts?.running)
          throw new RuntimeError('workspace_failed', await this.exitReport(workspaceId, 'the workspace'));
      }
      await delay(SSH_RETRY_MS);
    }
    throw new RuntimeError(
      'ssh_unreachable',
      `the workspace's sshd did not answer at ${host}:${WORKSPACE_PORTS.ssh}`,
    );
  }

  private async exitReport(id: string, what: string): Promise<string> {
    const facts = await this.inspect(id).catch(() => null);
    const state = facts?.running ? 'did not become ready in time' : 'exited';
    const logs = await this.docker
      .getContainer(id)
      .logs({ stdout: true, stderr: true, tail: 8 })
      .then((buffer) => lastLogLines(buffer as unknown as Buffer))
      .catch(() => '');
    return `${what} ${state}${logs ? `: ${logs}` : ''}`;
  }

  private async find(hostId: string, role: Role): Promise<ContainerFacts | null> {
    const [summary] = await this.docker.listContainers({
      all: true,
      filters: { label: [`${HOST_LABEL}=${hostId}`, `${ROLE_LABEL}=${role}`] },
    });
    if (summary) return this.inspect(summary.Id);
    if (role !== 'egress-gateway') return null;
    // One the host took from the pool: named for the host, labelled for the pool (and made by this gateway).
    const taken = await this.inspect(egressGatewayName(hostId));
    return taken?.labels[POOL_LABEL] && taken.labels[OWNER_LABEL] === this.owner ? taken : null;
  }

  private async inspect(id: string): Promise<ContainerFacts | null> {
    try {
      const info = await this.docker.getContainer(id).inspect();
      return {
        id: info.Id,
        running: info.State.Running && !info.State.Restarting && info.State.Pid > 0,
        paused: info.State.Paused,
        pid: info.State.Pid,
        uplinkAddress: info.NetworkSettings.Networks[UPLINK_NETWORK]?.IPAddress || null,
        labels: info.Config.Labels ?? {},
        configDir: info.Mounts.find((mount) => mount.Destination === GATEWAY_CONFIG_MOUNT)?.Source ?? null,
        user:
          (info.Config.Env ?? [])
            .find((entry) => entry.startsWith(WORKSPACE_USER_ENV))
            ?.slice(WORKSPACE_USER_ENV.length) ?? null,
        image: info.Config.Image,
        limits: {
          Memory: info.HostConfig.Memory ?? 0,
          MemorySwap: info.HostConfig.MemorySwap ?? 0,
          NanoCpus: info.HostConfig.NanoCpus ?? 0,
          PidsLimit: info.HostConfig.PidsLimit ?? 0,
        },
      };
    } catch (error) {
      if (statusCode(error) === 404) return null;
      throw error;
    }
  }

  // ------------------------------------------------------------------ images, volumes, network, files

  images(): Promise<ImageStatus[]> {
    return this.guard(() => imageStatuses(this.docker, this.options.images));
  }

  buildImages(rebuild: boolean, progress: ProgressReporter): Promise<void> {
    return buildImages(workspaceVariant(this.options.images), rebuild, progress);
  }

  /** The path as the workspace's user sees it (user-path-check.ts), after the one checked as root. */
  private verifyAsUser(
    workspaceId: string,
    linuxUser: string,
    exitIp: string,
    execAs = linuxUser,
  ): Promise<void> {
    return verifyAsWorkspaceUser(
      (command, timeoutMs, as) => execCapped(this.docker, workspaceId, command, timeoutMs, as),
      { name: linuxUser, execAs },
      this.plan,
      exitIp,
      this.timeouts.httpMs,
    );
  }

  private pathCheckProgram(netns: string, signal?: AbortSignal, holding?: HeldNetns): PathCheckProgram {
    return new PathCheckProgram(netns, {
      nodeCommand: this.checkOptions().nodeCommand,
      timeoutMs: 2 * this.timeouts.readyMs + pathCheckBudgetMs(this.checkOptions()),
      signal,
      holding,
    });
  }

  private checkOptions() {
    return {
      nodeCommand: this.options.nodeCommand ?? process.execPath,
      httpTimeoutMs: this.timeouts.httpMs,
      dnsTimeoutMs: this.timeouts.dnsMs,
    };
  }

  // ------------------------------------------------------------------ plumbing

  private async guard<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      throw asRuntimeError(error);
    }
  }
}

function checkHostId(hostId: string): void {
  if (!HOST_ID.test(hostId)) throw new RuntimeError('invalid_spec', `not a usable host id: ${hostId}`);
}

function checkSpec(spec: WorkspaceSpec): void {
  checkHostId(spec.hostId);
  if (!LINUX_USER.test(spec.linuxUser))
    throw new RuntimeError('invalid_spec', `not a usable Linux user name: ${spec.linuxUser}`);
  // VNC authentication uses 8 bytes; without any the desktop would refuse to start.
  if (!/^[\x21-\x7e]{1,8}$/.test(spec.desktopPassword))
    throw new RuntimeError('invalid_spec', 'the desktop password must be 1 to 8 printable characters');
  checkLimits(spec.limits);
}

function checkLimits(limits: WorkspaceLimits): void {
  const { memoryMb, cpus, pids, homeMb } = limits;
  if (!(memoryMb >= 64 && cpus > 0 && pids >= 32 && homeMb >= 64))
    throw new RuntimeError('invalid_spec', `limits too small: ${JSON.stringify(limits)}`);
}

function endpointsAt(address: string): WorkspaceEndpoints {
  return {
    ssh: { host: address, port: WORKSPACE_PORTS.ssh },
    desktop: { host: address, port: WORKSPACE_PORTS.desktop },
  };
}

/**
 * v2ray must get an IP literal (spike-egress.md §8.3): inside the gateway, names resolve through the tunnel.
 */
async function resolveServer(server: string, signal?: AbortSignal): Promise<string> {
  if (net.isIP(server)) return server;
  try {
    // A lookup cannot be aborted; a cancelled start stops waiting for it.
    const cancelled = new Promise<never>((_, reject) => {
      signal?.addEventListener('abort', () => reject(startCancelled()), { once: true });
    });
    cancelled.catch(() => {});
    return (await Promise.race([lookup(server, { family: 4 }), cancelled])).address;
  } catch (error) {
    if (signal?.aborted) throw startCancelled();
    throw new RuntimeError(
      'upstream_unresolvable',
      `cannot resolve the upstream host ${server}: ${(error as NodeJS.ErrnoException).code ?? error}`,
    );
  }
}

/** Promise.all that waits for every promise to settle before rejecting with the first failure. */
async function settleAll<T extends readonly unknown[]>(
  promises: {
    [K in keyof T]: Promise<T[K]>;
  },
): Promise<T> {
  const results = await Promise.allSettled(promises);
  const failed = results.find((result) => result.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((result) => (result as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/** This gateway's id for OWNER_LABEL: made once, kept in its runtime directory. */
export function gatewayInstanceId(runtimeDir: string): string {
  const file = path.join(runtimeDir, 'instance-id');
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    mkdirSync(runtimeDir, { recursive: true, mode: 0o700 });
    const id = randomBytes(8).toString('hex');
    writeFileSync(file, `${id}\n`, { mode: 0o600, flag: 'wx' });
    return id;
  }
}
