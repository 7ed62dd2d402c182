import {
  type ExecResult,
  type ImageStatus,
  RuntimeError,
  type UpstreamSpec,
  UpstreamSwitchReverted,
  type WorkspaceEndpoints,
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
  /** Milliseconds each lifecycle call takes (to observe busy hosts). */
  delayMs = 0;

  private async pause(): Promise<void> {
    if (this.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.delayMs));
  }

  async start(
    spec: WorkspaceSpec,
    upstream: UpstreamSpec,
    progress: (p: number, s: string) => Promise<void>,
  ) {
    this.calls.push(`start ${spec.hostId} ${upstream.exitIp}`);
    await progress(50, 'starting containers');
    await this.pause();
    if (this.failNextStart) {
      const code = this.failNextStart;
      this.failNextStart = null;
      throw new RuntimeError(code, `simulated ${code}`);
    }
    this.hosts.set(spec.hostId, { state: 'running', upstream, spec });
    return this.endpoints(spec.hostId) as Promise<WorkspaceEndpoints>;
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

  async state(hostId: string): Promise<WorkspaceState> {
    return this.hosts.get(hostId)?.state ?? 'missing';
  }

  /** Where hosts' desktops are reached (a local stand-in for websockify in proxy tests). */
  desktopEndpoint = { host: '127.0.0.1', port: 6080 };

  async endpoints(hostId: string): Promise<WorkspaceEndpoints | null> {
    return this.hosts.has(hostId)
      ? { ssh: { host: '127.0.0.1', port: 22 }, desktop: { ...this.desktopEndpoint } }
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

  async folderMountDir(): Promise<string | null> {
    return null;
  }

  async hostIds(): Promise<string[]> {
    return [...this.hosts.keys()];
  }

  imageTag(): string {
    return 'ccp-workspace:memory';
  }

  async images(): Promise<ImageStatus[]> {
    return [{ name: 'workspace', tag: this.imageTag(), present: true, created_at: null, size_bytes: null }];
  }

  watch(): () => void {
    return () => {};
  }
}
