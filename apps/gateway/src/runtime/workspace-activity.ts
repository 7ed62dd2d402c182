import { readFile } from 'node:fs/promises';
import type Docker from 'dockerode';
import { execCapped } from './container-exec.js';
import { HOST_LABEL, ROLE_LABEL, WORKSPACE_UID } from './container-specs.js';
import { WORKSPACE_LINK } from './egress-gateway-files.js';

/** What the engine shows of a running workspace's activity; counters only grow while it runs. */
export interface WorkspaceActivitySample {
  /** CPU time the workspace's cgroup has used, in seconds; null where the cgroup cannot be read. */
  cpuSeconds: number | null;
  /** Bytes both ways on the workspace's link to its egress gateway (all it has); null where unreadable. */
  networkBytes: number | null;
  /** The workspace process the counters belong to: a restarted container starts them from zero. */
  pid: number;
}

/** Reads a workspace's activity cheaply, for the lifecycle policy's rounds. */
export interface WorkspaceActivityProbe {
  /** Null when the host's workspace is not running on this engine. Read from files: cheap. */
  sample(hostId: string): Promise<WorkspaceActivitySample | null>;
  /**
   * When a tmux pane of the workspace's user last printed (ms since the epoch); null without a tmux server or a
   * running workspace. A command in the workspace: far dearer than a sample.
   */
  terminalOutputAt(hostId: string): Promise<number | null>;
  /** Shows a line to every tmux client attached in the workspace (its status line), for a few seconds. */
  tellTerminals(hostId: string, text: string): Promise<void>;
}

const TMUX_TIMEOUT_MS = 5000;

/** tmux clients told of a coming stop per host: an agent's and a few people's. */
const MAX_TOLD_CLIENTS = 16;

/**
 * The Docker engine's workspaces, read from this machine's /proc and cgroup files (the gateway runs beside its
 * engine): no engine stats call, which takes a quarter second a container. tmux runs as the workspace's user,
 * whose server is the one its sessions use.
 */
export class DockerActivityProbe implements WorkspaceActivityProbe {
  /**
   * CPU the probe's own commands cost each workspace's cgroup (runc and tmux run there), by the workspace process
   * they ran beside. Left out of the samples, or asking the terminals would itself read as activity.
   */
  private readonly ownCpu = new Map<string, { pid: number; seconds: number }>();

  constructor(private readonly docker: Docker) {}

  async sample(hostId: string): Promise<WorkspaceActivitySample | null> {
    const workspace = await this.workspace(hostId);
    if (!workspace) {
      this.ownCpu.delete(hostId);
      return null;
    }
    const [cpuSeconds, networkBytes] = await Promise.all([
      cpuSecondsOf(workspace.pid).catch(() => null),
      linkBytesOf(workspace.pid).catch(() => null),
    ]);
    const own = this.ownCpu.get(hostId);
    if (own && own.pid !== workspace.pid) this.ownCpu.delete(hostId);
    const ownSeconds = own?.pid === workspace.pid ? own.seconds : 0;
    return {
      cpuSeconds: cpuSeconds === null ? null : cpuSeconds - ownSeconds,
      networkBytes,
      pid: workspace.pid,
    };
  }

  /** Runs the probe's own command in the workspace, counting the CPU it cost there as the probe's. */
  private async ownCommand(
    hostId: string,
    workspace: { id: string; pid: number },
    command: string[],
  ): Promise<{ exitCode: number; stdout: string } | null> {
    const before = await cpuSecondsOf(workspace.pid).catch(() => null);
    const result = await execCapped(this.docker, workspace.id, command, TMUX_TIMEOUT_MS, {
      user: String(WORKSPACE_UID),
    }).catch(() => null);
    const after = await cpuSecondsOf(workspace.pid).catch(() => null);
    if (before !== null && after !== null) {
      const own = this.ownCpu.get(hostId);
      const seconds = (own?.pid === workspace.pid ? own.seconds : 0) + Math.max(0, after - before);
      this.ownCpu.set(hostId, { pid: workspace.pid, seconds });
    }
    return result;
  }

  async terminalOutputAt(hostId: string): Promise<number | null> {
    const workspace = await this.workspace(hostId);
    if (!workspace) return null;
    const terminal = await this.ownCommand(hostId, workspace, [
      'tmux',
      'list-panes',
      '-a',
      '-F',
      '#{window_activity}',
    ]);
    const times =
      terminal?.exitCode === 0
        ? terminal.stdout
            .split('\n')
            .map(Number)
            .filter((seconds) => Number.isFinite(seconds) && seconds > 0)
        : [];
    return times.length > 0 ? Math.max(...times) * 1000 : null;
  }

  async tellTerminals(hostId: string, text: string): Promise<void> {
    const workspace = await this.workspace(hostId);
    if (!workspace) return;
    const clients = await this.ownCommand(hostId, workspace, [
      'tmux',
      'list-clients',
      '-F',
      '#{client_name}',
    ]);
    if (clients?.exitCode !== 0) return;
    // The list is the workspace's to write: a bounded number of clients, so one workspace cannot hold the round.
    // -d: shown for 15 s; `#` doubled so tmux prints the text as it is.
    for (const client of clients.stdout.split('\n').filter(Boolean).slice(0, MAX_TOLD_CLIENTS))
      await this.ownCommand(hostId, workspace, [
        'tmux',
        'display-message',
        '-d',
        '15000',
        '-c',
        client,
        text.replaceAll('#', '##'),
      ]);
  }

  private async workspace(hostId: string): Promise<{ id: string; pid: number } | null> {
    const [summary] = await this.docker.listContainers({
      filters: { label: [`${HOST_LABEL}=${hostId}`, `${ROLE_LABEL}=workspace`], status: ['running'] },
    });
    if (!summary) return null;
    const info = await this.docker.getContainer(summary.Id).inspect();
    return info.State.Running && info.State.Pid > 0 ? { id: info.Id, pid: info.State.Pid } : null;
  }
}

/** CPU time of a process's cgroup: cgroup v1's cpuacct.usage (ns), or v2's cpu.stat usage_usec. */
async function cpuSecondsOf(pid: number): Promise<number | null> {
  const lines = (await readFile(`/proc/${pid}/cgroup`, 'utf8')).split('\n');
  const v1 = lines.map((line) => /^\d+:(?:[^:]*,)?cpuacct(?:,[^:]*)?:(.*)$/.exec(line)?.[1]).find(Boolean);
  if (v1 !== undefined)
    return Number(await readFile(`/sys/fs/cgroup/cpuacct${v1}/cpuacct.usage`, 'utf8')) / 1e9;
  const v2 = lines.map((line) => /^0::(.*)$/.exec(line)?.[1]).find(Boolean);
  if (v2 === undefined) return null;
  const stat = await readFile(`/sys/fs/cgroup${v2}/cpu.stat`, 'utf8');
  const usec = /^usage_usec (\d+)$/m.exec(stat)?.[1];
  return usec === undefined ? null : Number(usec) / 1e6;
}

/** Received plus sent bytes of the workspace's end of its link, from its namespace's /proc/net/dev. */
async function linkBytesOf(pid: number): Promise<number | null> {
  const devices = await readFile(`/proc/${pid}/net/dev`, 'utf8');
  const line = devices
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l.startsWith(`${WORKSPACE_LINK.workspaceInterface}:`));
  if (!line) return null;
  // After the name: receive bytes, packets, errs, drop, fifo, frame, compressed, multicast, then transmit bytes.
  const fields = line
    .slice(line.indexOf(':') + 1)
    .trim()
    .split(/\s+/)
    .map(Number);
  return (fields[0] ?? 0) + (fields[8] ?? 0);
}
