import type { EgressPolicy, ProxyConfig } from '@ccp/api';
import type { ReadDecisions, UpstreamCounters } from '../egress/tunnel-engine.js';
import { DomainError } from '../shared/errors.js';

/** One upstream a host may send its traffic through. */
export interface UpstreamSpec {
  egressIpId: string;
  label: string;
  /** The declared exit IP: the path check must observe exactly this address. */
  exitIp: string;
  config: ProxyConfig;
}

/** What the runtime needs to make or remake a host's workspace. */
export interface WorkspaceSpec {
  hostId: string;
  shortId: string;
  /** Linux account inside the workspace. */
  linuxUser: string;
  /** Public half of the gateway's per-host key, authorised for `linuxUser`. */
  authorizedKey: string;
  /** The VNC password of the desktop (8 characters): the gateway's proxy answers with it, nobody else knows it. */
  desktopPassword: string;
  limits: WorkspaceLimits;
  /** What the workspace may reach through its upstream (the host's effective policy); none: everything. */
  egressPolicy?: EgressPolicy | null;
}

/** What a workspace may use: its container's memory, CPUs and processes, and the size of its home. */
export interface WorkspaceLimits {
  memoryMb: number;
  cpus: number;
  pids: number;
  /** The home volume's size: it is made with it and grown to it, never shrunk. */
  homeMb: number;
}

/** What a running workspace uses of its limits, for the checks that report pressure. */
export interface ResourceUsage {
  memory: { workingSetBytes: number; limitBytes: number; oomKills: number } | null;
  /** Null for a home made before homes had a size. */
  home: { usedBytes: number; sizeBytes: number } | null;
}

export interface Endpoint {
  host: string;
  port: number;
}

/** Where the gateway reaches a running workspace (through its egress gateway, from the gateway's address only). */
export interface WorkspaceEndpoints {
  ssh: Endpoint;
  desktop: Endpoint;
}

export type ProgressReporter = (progress: number, stage: string) => Promise<void>;

/**
 * A runtime failure with a precise code for the task's error. Its kind is internal: a request it escapes into
 * answers a plain 500, as the engine's words are not the caller's business.
 */
export class RuntimeError extends DomainError {
  constructor(code: string, message: string) {
    // An engine that does not answer is no fault of the gateway's: 503 with the message, not a bare 500.
    super(code === 'runtime_unavailable' ? 'unavailable' : 'internal', code, message);
    this.name = 'RuntimeError';
  }
}

/**
 * A switch whose new upstream failed, after the egress gateway went back to the upstream it had and passed its
 * checks again: the host is still running. `code` and the message are the new upstream's failure.
 */
export class UpstreamSwitchReverted extends RuntimeError {
  constructor(failure: RuntimeError) {
    super(failure.code, failure.message);
    this.name = 'UpstreamSwitchReverted';
  }
}

/** What a start whose signal was aborted fails with, once it has undone what it made. */
export const startCancelled = () => new RuntimeError('cancelled', 'the start was cancelled');

export interface ImageStatus {
  name: 'workspace' | 'egress-gateway';
  tag: string;
  present: boolean;
  created_at: string | null;
  size_bytes: number | null;
}

/** Something the engine did on its own that the event log should show. */
export interface RuntimeNotice {
  hostId: string;
  /** `egress_restarted`: the egress gateway's supervisor restarted v2ray after it died. */
  kind: 'egress_restarted';
  message: string;
}

export type WorkspaceState = 'running' | 'stopped' | 'missing' | 'broken';

/** The outcome of a command run in a workspace container. */
export interface ExecResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/**
 * Bytes a host's egress gateway moved through an upstream since they were last read. `egressIpId` names the
 * upstream when it is not the host's current one (bytes counted before a switch); null means the current.
 */
export interface MeteredTraffic extends UpstreamCounters {
  egressIpId: string | null;
}

/** A started workspace: where it answers, and the IP echoes that were out when its path was verified. */
export type StartedWorkspace = WorkspaceEndpoints & { echoesOut: string[] };

/** The container engine behind hosts. Docker today; a Kubernetes driver can implement the same contract. */
export interface WorkspaceRuntime {
  /**
   * Creates what is missing and starts the egress gateway, then the workspace; verifies the path last. Once
   * `signal` aborts, it stops waiting, removes what this start created (containers, volumes, files), stops
   * what existed before, and fails with `startCancelled()`.
   */
  start(
    spec: WorkspaceSpec,
    upstream: UpstreamSpec,
    progress: ProgressReporter,
    signal?: AbortSignal,
  ): Promise<StartedWorkspace>;
  stop(hostId: string): Promise<void>;
  /**
   * Makes a host's volumes and workspace container ahead of its first start and sets the workspace up (run once
   * without a network, then stopped), so that start is a `docker start` like every later one; a start asked
   * meanwhile takes over. What exists is left as a start would find it.
   */
  prepare(spec: WorkspaceSpec): Promise<void>;
  /** Recreates the workspace container from the current image, keeping its home and SSH host keys. */
  rebuild(spec: WorkspaceSpec, upstream: UpstreamSpec | null, progress: ProgressReporter): Promise<void>;
  /** Removes every container, network link and volume of the host. */
  remove(hostId: string): Promise<void>;
  /**
   * Switches a running host's egress gateway to another upstream in place; traffic is dropped meanwhile. When
   * the new path fails its checks, the gateway goes back to `fallback` (the upstream it had) and the call fails
   * with UpstreamSwitchReverted; without a fallback, or when the fallback fails too, the host is left stopped.
   */
  switchUpstream(hostId: string, upstream: UpstreamSpec, fallback: UpstreamSpec | null): Promise<void>;
  /**
   * Makes a running host's egress gateway follow `policy` (null: none) on `upstream`, the one it uses: its files
   * are written again and only its v2ray (and DNS filter) restarted, the kill switch holding meanwhile, so open
   * sessions stay. Fails with `not_running`, or `egress_gateway_outdated` for a gateway made from an older
   * recipe (it follows the policy from its next start).
   */
  applyEgressPolicy(hostId: string, upstream: UpstreamSpec, policy: EgressPolicy | null): Promise<void>;
  state(hostId: string): Promise<WorkspaceState>;
  /**
   * Applies new limits to the host's workspace container where it exists, running or not (memory, CPUs and
   * processes in place), so nothing installed in it is lost; answers when the home has its new size: `now`, or
   * `next_start` where a running home cannot grow online. A home is never shrunk: `home_shrink` when asked to.
   * Fails with `resize_refused` when the engine refuses (memory below what runs).
   */
  resize(hostId: string, limits: WorkspaceLimits): Promise<'now' | 'next_start'>;
  /** The home's size in MiB as made or last grown; null when it has none yet (or predates sized homes). */
  homeSizeMb(hostId: string): Promise<number | null>;
  /** What the running workspace uses; null when it is not running. */
  usage(hostId: string): Promise<ResourceUsage | null>;
  endpoints(hostId: string): Promise<WorkspaceEndpoints | null>;
  /**
   * Runs a command as root in the running workspace container (the desktop's controls, image/README.md);
   * null when that container is not running. Fails with `exec_timeout` after `timeoutMs`, and with
   * `exec_output_too_large` once either output stream passes EXEC_OUTPUT_CAP (capped-output.ts): the workspace
   * is the user's, and so is what its commands print.
   */
  exec(hostId: string, command: string[], timeoutMs: number): Promise<ExecResult | null>;
  /**
   * The directory on this machine whose sub-mounts the running workspace sees under MOUNTS_IN_WORKSPACE
   * (folder-mount-points.ts); null when the host is not running or its container was made without one.
   */
  folderMountDir(hostId: string): Promise<string | null>;
  /**
   * The bytes through the host's upstream since the last call (each call takes them: a second call right after
   * finds none): what the running egress gateway counted, and what a stop or an upstream switch read from it
   * before its counters went away. Empty when nothing was counted.
   */
  takeEgressTraffic(hostId: string): Promise<MeteredTraffic[]>;
  /**
   * Holds the running host's traffic through its upstream to `bytesPerSecond` each way, in its egress gateway
   * where the workspace cannot lift it; null lifts it. False when the host is not running.
   */
  throttleEgress(hostId: string, bytesPerSecond: number | null): Promise<boolean>;
  /**
   * Freezes the running workspace's processes (`true`, the cgroup freezer) or thaws them; its sessions' TCP
   * connections stay open meanwhile. False when the workspace is not running.
   */
  freeze(hostId: string, frozen: boolean): Promise<boolean>;
  /**
   * What the running egress gateway's policy blocked or would have blocked since the last call (each call takes
   * them), counted per minute and destination; nothing when it is not running or its policy records nothing.
   */
  takeEgressDecisions(hostId: string): Promise<ReadDecisions>;
  /**
   * Removes the egress gateways started ahead for an upstream (its config changed, or it was deleted); without
   * one, all of them, those an earlier process left included (start-up, shutdown).
   */
  retireEgressGateways(egressIpId?: string): Promise<void>;
  /** Ids of every host the engine holds something for (by label). */
  hostIds(): Promise<string[]>;
  /** The workspace image a new container would use. */
  imageTag(): string;
  /** Whether the images hosts need are built. */
  images(): Promise<ImageStatus[]>;
  /** Builds them (those missing, or all with `rebuild`), reporting its steps. */
  buildImages(rebuild: boolean, progress: ProgressReporter): Promise<void>;
  /** Follows the engine so links are restored when a container restarts, and reports what happened on its
   * own (`onNotice`); returns the function that stops it. */
  watch(onError: (error: unknown) => void, onNotice?: (notice: RuntimeNotice) => void): () => void;
}
