import type { EgressPolicy } from '@ccp/api';
import type { ReadDecisions } from '../../src/egress/tunnel-engine.js';
import {
  type ExecResult,
  type ImageStatus,
  type MeteredTraffic,
  type ProgressReporter,
  type ResourceUsage,
  RuntimeError,
  startCancelled,
  type UpstreamSpec,
  UpstreamSwitchReverted,
  type WorkspaceEndpoints,
  type WorkspaceLimits,
  type WorkspaceRuntime,
  type WorkspaceSpec,
  type WorkspaceState,
} from '../../src/runtime/workspace-runtime.js';

/** An in-memory WorkspaceRuntime for tests of the hosts API's rules; the Docker driver has its own real tests. */
export class MemoryRuntime implements WorkspaceRuntime {
  readonly hosts = new Map<
    string,
    { state: WorkspaceState; upstream: UpstreamSpec | null; spec: WorkspaceSpec }
  >();
  readonly calls: string[] = [];
  /** Set to make the next start fail with this code. */
  failNextStart: string | null = null;
  /** Set to make the next switch fail its checks with this code. */
  failNextSwitch: string | null = null;
  /** Set to make the next resize fail with this code. */
  failNextResize: string | null = null;
  /** Milliseconds each lifecycle call takes (to observe busy hosts). */
  delayMs = 0;
  /** While set, starts wait as on an upstream that never answers, until cancelled or `releaseStarts()`. */
  holdStarts = false;
  private readonly held = new Set<() => void>();

  releaseStarts(): void {
    this.holdStarts = false;
    for (const release of this.held) release();
  }

  private async pause(signal?: AbortSignal, hold = false): Promise<void> {
    const ms = this.delayMs;
    if (ms <= 0 && !hold) return;
    await new Promise<void>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.held.delete(done);
        signal?.removeEventListener('abort', cancelled);
        resolve();
      };
      const cancelled = () => {
        clearTimeout(timer);
        this.held.delete(done);
        reject(startCancelled());
      };
      const timer = hold ? undefined : setTimeout(done, ms);
      if (hold) this.held.add(done);
      if (signal?.aborted) cancelled();
      else signal?.addEventListener('abort', cancelled, { once: true });
    });
  }

  async start(
    spec: WorkspaceSpec,
    upstream: UpstreamSpec,
    progress: (p: number, s: string) => Promise<void>,
    signal?: AbortSignal,
  ) {
    this.calls.push(`start ${spec.hostId} ${upstream.exitIp}`);
    await progress(50, 'starting containers');
    try {
      await this.pause(signal, this.holdStarts);
    } catch (error) {
      // Like the Docker driver: a cancelled start leaves nothing behind.
      this.calls.push(`start cancelled ${spec.hostId}`);
      throw error;
    }
    if (this.failNextStart) {
      const code = this.failNextStart;
      this.failNextStart = null;
      throw new RuntimeError(code, `simulated ${code}`);
    }
    this.hosts.set(spec.hostId, { state: 'running', upstream, spec });
    return { ...((await this.endpoints(spec.hostId)) as WorkspaceEndpoints), echoesOut: [] };
  }

  async stop(hostId: string) {
    this.calls.push(`stop ${hostId}`);
    await this.pause();
    const host = this.hosts.get(hostId);
    if (host) host.state = 'stopped';
  }

  async rebuild(spec: WorkspaceSpec, upstream: UpstreamSpec | null) {
    this.calls.push(`rebuild ${spec.hostId}`);
    await this.pause();
    this.hosts.set(spec.hostId, { state: upstream ? 'running' : 'stopped', upstream, spec });
  }

  async remove(hostId: string) {
    this.calls.push(`remove ${hostId}`);
    this.hosts.delete(hostId);
  }

  async switchUpstream(hostId: string, upstream: UpstreamSpec, fallback: UpstreamSpec | null) {
    this.calls.push(`switch ${hostId} ${upstream.exitIp}`);
    const host = this.hosts.get(hostId);
    if (this.failNextSwitch) {
      const failure = new RuntimeError(this.failNextSwitch, `simulated ${this.failNextSwitch}`);
      this.failNextSwitch = null;
      if (host && fallback) {
        host.upstream = fallback;
        throw new UpstreamSwitchReverted(failure);
      }
      if (host) host.state = 'stopped';
      throw failure;
    }
    if (host) host.upstream = upstream;
  }

  /** The policy a running host's gateway follows goes into its spec, as a start puts it there. */
  async applyEgressPolicy(hostId: string, upstream: UpstreamSpec, policy: EgressPolicy | null) {
    this.calls.push(`egress-policy ${hostId} ${policy?.mode ?? 'none'}`);
    const host = this.hosts.get(hostId);
    if (host?.state !== 'running') throw new RuntimeError('not_running', `host ${hostId} is not running`);
    host.upstream = upstream;
    host.spec = { ...host.spec, egressPolicy: policy };
  }

  /** The limits each host was last resized to; the usage a test wants the next resource check to read. */
  readonly resized = new Map<string, WorkspaceLimits>();
  readonly usages = new Map<string, ResourceUsage>();

  /** Hosts whose workspace was made ahead (not in `calls`: tests read those as what users asked for). */
  readonly prepared: string[] = [];

  async prepare(spec: WorkspaceSpec): Promise<void> {
    this.prepared.push(spec.hostId);
  }

  async resize(hostId: string, limits: WorkspaceLimits): Promise<'now' | 'next_start'> {
    this.calls.push(`resize ${hostId}`);
    if (this.failNextResize) {
      const code = this.failNextResize;
      this.failNextResize = null;
      throw new RuntimeError(code, `simulated ${code}`);
    }
    this.resized.set(hostId, limits);
    const host = this.hosts.get(hostId);
    if (host) host.spec = { ...host.spec, limits };
    return 'now';
  }

  async homeSizeMb(hostId: string): Promise<number | null> {
    return this.hosts.get(hostId)?.spec.limits.homeMb ?? null;
  }

  async usage(hostId: string): Promise<ResourceUsage | null> {
    return this.hosts.get(hostId)?.state === 'running' ? (this.usages.get(hostId) ?? null) : null;
  }

  async state(hostId: string): Promise<WorkspaceState> {
    return this.hosts.get(hostId)?.state ?? 'missing';
  }

  /** Where hosts' desktops are reached (a local stand-in for websockify in proxy tests). */
  desktopEndpoint = { host: '127.0.0.1', port: 6080 };
  /** Where hosts' sshd is reached (a local stand-in in proxy tests). */
  sshEndpoint = { host: '127.0.0.1', port: 22 };

  async endpoints(hostId: string): Promise<WorkspaceEndpoints | null> {
    return this.hosts.has(hostId)
      ? { ssh: { ...this.sshEndpoint }, desktop: { ...this.desktopEndpoint } }
      : null;
  }

  /** The desktop of each host as `ccp-desktop` in the image reports it (running unless set). */
  readonly desktops = new Map<string, 'running' | 'starting' | 'stopped'>();

  async exec(hostId: string, command: string[]): Promise<ExecResult | null> {
    this.calls.push(`exec ${hostId} ${command.join(' ')}`);
    if (this.hosts.get(hostId)?.state !== 'running') return null;
    const [program, action] = command;
    if (!program?.endsWith('/ccp-desktop'))
      return { exitCode: 127, stdout: '', stderr: `${program}: not found` };
    if (action === 'start' || action === 'restart') this.desktops.set(hostId, 'running');
    const status = this.desktops.get(hostId) ?? 'running';
    const report = { status, auto_restart_limited: false, display: ':1', websocket_port: 6080, error: '' };
    return { exitCode: 0, stdout: `${JSON.stringify(report)}\n`, stderr: '' };
  }

  /** Bytes the next takeEgressTraffic hands out, per host (tests of the meter set them). */
  readonly egressTraffic = new Map<string, MeteredTraffic[]>();

  /** The rate throttleEgress set per host, and the hosts frozen. */
  readonly throttles = new Map<string, number>();
  readonly frozen = new Set<string>();

  async throttleEgress(hostId: string, bytesPerSecond: number | null): Promise<boolean> {
    if (bytesPerSecond === null) this.throttles.delete(hostId);
    else this.throttles.set(hostId, bytesPerSecond);
    return true;
  }

  async freeze(hostId: string, frozen: boolean): Promise<boolean> {
    if (frozen) this.frozen.add(hostId);
    else this.frozen.delete(hostId);
    return true;
  }

  async takeEgressTraffic(hostId: string): Promise<MeteredTraffic[]> {
    const taken = this.egressTraffic.get(hostId) ?? [];
    this.egressTraffic.delete(hostId);
    return taken;
  }

  /** What the next takeEgressDecisions hands out, per host (tests of the decision log set them). */
  readonly egressDecisions = new Map<string, ReadDecisions>();

  async takeEgressDecisions(hostId: string): Promise<ReadDecisions> {
    const taken = this.egressDecisions.get(hostId) ?? { counts: [], refused: 0, overflowed: false };
    this.egressDecisions.delete(hostId);
    return taken;
  }

  async folderMountDir(): Promise<string | null> {
    return null;
  }

  /** Upstreams whose pooled gateways were retired, in order (undefined: all). */
  readonly retired: (string | undefined)[] = [];

  async retireEgressGateways(egressIpId?: string): Promise<void> {
    this.retired.push(egressIpId);
  }

  async hostIds(): Promise<string[]> {
    return [...this.hosts.keys()];
  }

  imageTag(): string {
    return 'ccp-workspace:memory';
  }

  /** Whether the workspace image counts as built. */
  imagePresent = true;
  /** Held by an image build until resolved (tests watch its progress meanwhile); a build then makes it present. */
  imageBuild: Promise<void> = Promise.resolve();

  async buildImages(rebuild: boolean, progress: ProgressReporter): Promise<void> {
    this.calls.push(`buildImages ${rebuild ? 'rebuild' : 'missing'}`);
    await progress(40, 'docker build ccp-workspace:memory');
    await this.imageBuild;
    this.imagePresent = true;
  }

  async images(): Promise<ImageStatus[]> {
    return [
      {
        name: 'workspace',
        tag: this.imageTag(),
        present: this.imagePresent,
        created_at: this.imagePresent ? '2026-01-02T03:04:05Z' : null,
        size_bytes: this.imagePresent ? 800_000_000 : null,
      },
    ];
  }

  watch(): () => void {
    return () => {};
  }
}
