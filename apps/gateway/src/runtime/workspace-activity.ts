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
  /** When a tmux pane of the workspace's user last printed (ms since the epoch); null without a tmux server. */
  terminalOutputAt: number | null;
  /** The workspace process the counters belong to: a restarted container starts them from zero. */
  pid: number;
}

/** Reads a workspace's activity cheaply, for the lifecycle policy's rounds. */
export interface WorkspaceActivityProbe {
  /** Null when the host's workspace is not running on this engine. */
  sample(hostId: string): Promise<WorkspaceActivitySample | null>;
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
  constructor(private readonly docker: Docker) {}

  async sample(hostId: string): Promise<WorkspaceActivitySample | null> {
    const workspace = await this.workspace(hostId);
    if (!workspace) return null;
    const [cpuSeconds, networkBytes, terminal] = await Promise.all([
      cpuSecondsOf(workspace.pid).catch(() => null),
      linkBytesOf(workspace.pid).catch(() => null),
      execCapped(
        this.docker,
        workspace.id,
        ['tmux', 'list-panes', '-a', '-F', '#{window_activity}'],
        TMUX_TIMEOUT_MS,
        {
          user: String(WORKSPACE_UID),
        },
      ).catch(() => null),
    ]);
    const times =
      terminal?.exitCode === 0
        ? terminal.stdout
            .split('\n')
            .map(Number)
            .filter((seconds) => Number.isFinite(seconds) && seconds > 0)
        : [];
    return {
      cpuSeconds,
      networkBytes,
      terminalOutputAt: times.length > 0 ? Math.max(...times) * 1000 : null,
      pid: workspace.pid,
    };
  }

  async tellTerminals(hostId: string, text: string): Promise<void> {
    const workspace = await this.workspace(hostId);
    if (!workspace) return;
    const as = { user: String(WORKSPACE_UID) };
    const clients = await execCapped(
      this.docker,
      workspace.id,
      ['tmux', 'list-clients', '-F', '#{client_name}'],
      TMUX_TIMEOUT_MS,
      as,
    ).catch(() => null);
    if (clients?.exitCode !== 0) return;
    // The list is the workspace's to write: a bounded number of clients, so one workspace cannot hold the round.
    for (const client of clients.stdout.split('\n').filter(Boolean).slice(0, MAX_TOLD_CLIENTS))
      await execCapped(
        this.docker,
        workspace.id,
        // -d: shown for 15 s; `#` doubled so tmux prints the text as it is.
        ['tmux', 'display-message', '-d', '15000', '-c', client, text.replaceAll('#', '##')],
        TMUX_TIMEOUT_MS,
        as,
      ).catch(() => null);
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
