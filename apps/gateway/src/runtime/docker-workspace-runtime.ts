import { createHash, randomBytes } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdir, readFile, rename, rm, rmdir, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import Docker from 'dockerode';
import type { EgressSettings } from '../config.js';
import { tunnelDns, type VerificationPlan, verificationPlan } from '../egress/egress-verification.js';
import { cappedOutput, EXEC_OUTPUT_CAP } from './capped-output.js';
import { DESKTOP_PASSWORD_FILE, desktopPasswordArchive } from './desktop-secret.js';
import {
  GATEWAY_NETWORK,
  relayEnvironment,
  renderEgressGatewayFiles,
  WORKSPACE_LINK,
  WORKSPACE_PORTS,
} from './egress-gateway-files.js';
import { MOUNTS_IN_WORKSPACE, makeTraversableDir, propagatesToContainers } from './folder-mount-points.js';
import { CommandError, linkWorkspace, listensOnTcp, unlinkWorkspace, workspaceLinked } from './netns.js';
import { verifyEgressPath } from './path-check.js';
import {
  type ExecResult,
  type ImageStatus,
  type ProgressReporter,
  RuntimeError,
  type RuntimeNotice,
  startCancelled,
  type UpstreamSpec,
  UpstreamSwitchReverted,
  type WorkspaceEndpoints,
  type WorkspaceRuntime,
  type WorkspaceSpec,
  type WorkspaceState,
} from './workspace-runtime.js';

export const HOST_LABEL = 'cloud-cli-proxy.host';
const ROLE_LABEL = 'cloud-cli-proxy.role';
/** The gateway (its DATA_DIR) that made a container: a gateway re-links only its own hosts, so two gateways on one
 * engine (staging beside production, parallel test runs) never touch each other's namespaces. */
const OWNER_LABEL = 'cloud-cli-proxy.gateway';
/** Hash of what a workspace container was made from; another hash means it must be made again. */
const SPEC_LABEL = 'cloud-cli-proxy.spec';
/** The shared uplink bridge of every egress gateway (not any one host's, so it carries no host label). */
export const UPLINK_NETWORK = 'ccp-uplink';

export const WORKSPACE_UID = 1000;
const CA_IN_GATEWAY = '/usr/local/share/ccp-egress/ca.pem';

type Role = 'workspace' | 'egress-gateway';

export interface DockerWorkspaceRuntimeOptions {
  docker: Docker;
  /** Image tags (image/build.sh prints them; image-inputs.ts computes them). */
  images: { workspace: string; egressGateway: string };
  /** The gateway's DATA_DIR: egress gateway configs and the workspaces' resolv.conf live under `runtime/`. */
  dataDir: string;
  /** config.egress: the endpoints the path check asks and the DNS the tunnel resolves with. */
  egress: EgressSettings;
  /** Node.js run inside a workspace's namespace for the path check; the gateway's own by default. */
  nodeCommand?: string;
  /**
   * This gateway's part of config.folderMounts.dir: a directory per host under it is bound into the workspace,
   * so that mounts made there appear inside. Absent, or where mounts do not propagate, hosts go without.
   */
  folderMountsDir?: string;
  /** Limits of each egress gateway container. */
  gatewayLimits?: { memoryMb: number; pids: number };
  timeouts?: Partial<Timeouts>;
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
  pid: number;
  uplinkAddress: string | null;
  labels: Record<string, string>;
  /** The image name it was created from (tags carry the recipe's hash). */
  image: string;
}

const HOST_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const LINUX_USER = /^[a-z_][a-z0-9_-]{0,31}$/;

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const statusCode = (error: unknown) => (error as { statusCode?: number }).statusCode;

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
  private readonly queues = new Map<string, Promise<unknown>>();
  private uplinkQueue: Promise<unknown> = Promise.resolve();
  private readonly owner: string;

  constructor(private readonly options: DockerWorkspaceRuntimeOptions) {
    this.docker = options.docker;
    this.timeouts = { ...DEFAULT_TIMEOUTS, ...options.timeouts };
    this.plan = verificationPlan(options.egress);
    this.runtimeDir = path.resolve(options.dataDir, 'runtime');
    this.owner = gatewayInstanceId(this.runtimeDir);
  }

  imageTag(): string {
    return this.options.images.workspace;
  }

  async start(
    spec: WorkspaceSpec,
    upstream: UpstreamSpec,
    progress: ProgressReporter,
    signal?: AbortSignal,
  ): Promise<WorkspaceEndpoints> {
    checkSpec(spec);
    return this.exclusive(spec.hostId, () => this.startNow(spec, upstream, progress, signal));
  }

  async stop(hostId: string): Promise<void> {
    checkHostId(hostId);
    return this.exclusive(hostId, () => this.guard(() => this.stopNow(hostId)));
  }

  async rebuild(
    spec: WorkspaceSpec,
    upstream: UpstreamSpec | null,
    progress: ProgressReporter,
  ): Promise<void> {
    checkSpec(spec);
    return this.exclusive(spec.hostId, () =>
      this.guard(async () => {
        await progress(5, 'checking the images');
        await this.requireImages();
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
        await this.prepareWorkspace(spec);
        await progress(100, 'rebuilt');
      }),
    );
  }

  async remove(hostId: string): Promise<void> {
    checkHostId(hostId);
    return this.exclusive(hostId, () =>
      this.guard(async () => {
        const filters = { label: [`${HOST_LABEL}=${hostId}`] };
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
        await rm(this.gatewayDir(hostId), { recursive: true, force: true });
        // rmdir, never a recursive removal: a live folder mount there holds the user's own files.
        const mounts = this.options.folderMountsDir;
        if (mounts) await rmdir(path.join(mounts, hostId)).catch(() => {});
      }),
    );
  }

  async switchUpstream(hostId: string, upstream: UpstreamSpec, fallback: UpstreamSpec | null): Promise<void> {
    checkHostId(hostId);
    return this.exclusive(hostId, () =>
      this.guard(async () => {
        const found = await this.find(hostId, 'egress-gateway');
        const workspace = await this.find(hostId, 'workspace');
        if (!found?.running || !workspace?.running)
          throw new RuntimeError('not_running', `host ${hostId} is not running`);
        let gateway = found;
        const { hostAddress } = await this.ensureUplink();
        const apply = async (target: UpstreamSpec) => {
          const serverIp = await resolveServer(target.config.server);
          await this.writeGatewayFiles(hostId, target, serverIp, hostAddress);
          if (gateway.image === this.options.images.egressGateway) {
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

  async exec(hostId: string, command: string[], timeoutMs: number): Promise<ExecResult | null> {
    checkHostId(hostId);
    return this.guard(async () => {
      const workspace = await this.find(hostId, 'workspace');
      if (!workspace?.running) return null;
      const exec = await this.docker.getContainer(workspace.id).exec({
        Cmd: command,
        User: 'root',
        AttachStdout: true,
        AttachStderr: true,
      });
      const stream = await exec.start({ hijack: true, stdin: false });
      // Past the cap, stop reading rather than drain: a command that prints without end would otherwise be read
      // at full speed until the timeout, for every call in parallel.
      const cut = () => stream.destroy();
      const stdout = cappedOutput(EXEC_OUTPUT_CAP, cut);
      const stderr = cappedOutput(EXEC_OUTPUT_CAP, cut);
      this.docker.modem.demuxStream(stream, stdout.sink, stderr.sink);
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          stream.destroy();
          reject(
            new RuntimeError(
              'exec_timeout',
              `\`${command.join(' ')}\` did not finish within ${timeoutMs} ms`,
            ),
          );
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          resolve();
        };
        stream.on('end', done);
        stream.on('close', done);
        stream.on('error', (error) => {
          clearTimeout(timer);
          reject(error);
        });
      });
      const flooded = stdout.truncated() ? 'stdout' : stderr.truncated() ? 'stderr' : null;
      if (flooded) {
        throw new RuntimeError(
          'exec_output_too_large',
          `\`${command.join(' ')}\` printed more than ${EXEC_OUTPUT_CAP} bytes on ${flooded}; the gateway stopped reading`,
        );
      }
      const { ExitCode } = await exec.inspect();
      return { exitCode: ExitCode ?? -1, stdout: stdout.text(), stderr: stderr.text() };
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

  /**
   * Re-links workspaces whose containers (re)started without the gateway's involvement (a crash under the
   * restart policy, a daemon restart): a new namespace has no link until one is made. Catches up on every
   * host when it (re)subscribes. Returns the function that stops watching.
   */
  watch(
    onError: (error: unknown) => void = () => {},
    onNotice: (notice: RuntimeNotice) => void = () => {},
  ): () => void {
    // The events stream is idle for long stretches: it needs a client without the API timeout.
    const events = new Docker({
      socketPath: (this.docker.modem as unknown as { socketPath: string }).socketPath,
    });
    let stopped = false;
    let stream: NodeJS.ReadableStream | null = null;
    // The egress gateway's supervisor says in its log when v2ray died and is restarted: that is worth an event.
    const followed = new Set<string>();
    const logStreams = new Set<NodeJS.ReadableStream>();
    const follow = (containerId: string, hostId: string) => {
      if (stopped || followed.has(containerId)) return;
      followed.add(containerId);
      this.followSupervisor(events, containerId, hostId, onNotice)
        .then((logs) => {
          logStreams.add(logs);
          const forget = () => {
            followed.delete(containerId);
            logStreams.delete(logs);
          };
          logs.on('close', forget);
          logs.on('end', forget);
          logs.on('error', forget);
          if (stopped) (logs as { destroy?: () => void }).destroy?.();
        })
        .catch((error: unknown) => {
          followed.delete(containerId);
          onError(error);
        });
    };
    const loop = async () => {
      while (!stopped) {
        try {
          stream = await events.getEvents({
            filters: {
              type: ['container'],
              event: ['start'],
              label: [HOST_LABEL, `${OWNER_LABEL}=${this.owner}`],
            },
          });
          for (const hostId of await this.hostIds()) this.relink(hostId).catch(onError);
          const gateways = await this.docker.listContainers({
            filters: { label: [`${OWNER_LABEL}=${this.owner}`, `${ROLE_LABEL}=egress-gateway`] },
          });
          for (const gateway of gateways) {
            const hostId = gateway.Labels[HOST_LABEL];
            if (hostId && HOST_ID.test(hostId)) follow(gateway.Id, hostId);
          }
          await readEvents(stream, (event) => {
            const hostId = event.Actor?.Attributes?.[HOST_LABEL];
            if (!hostId || !HOST_ID.test(hostId)) return;
            this.relink(hostId).catch(onError);
            if (event.Actor?.Attributes?.[ROLE_LABEL] === 'egress-gateway' && event.Actor.ID)
              follow(event.Actor.ID, hostId);
          });
        } catch (error) {
          if (!stopped) onError(error);
        }
        if (!stopped) await delay(1000);
      }
    };
    void loop();
    return () => {
      stopped = true;
      (stream as { destroy?: () => void } | null)?.destroy?.();
      for (const logs of logStreams) (logs as { destroy?: () => void }).destroy?.();
    };
  }

  /** Follows an egress gateway's log from now on and reports its supervisor's restarts of v2ray. */
  private async followSupervisor(
    client: Docker,
    containerId: string,
    hostId: string,
    onNotice: (notice: RuntimeNotice) => void,
  ): Promise<NodeJS.ReadableStream> {
    const logs = (await client.getContainer(containerId).logs({
      follow: true,
      stdout: true,
      stderr: true,
      since: Math.floor(Date.now() / 1000),
    })) as NodeJS.ReadableStream;
    let pending = '';
    const lines = new PassThrough();
    lines.on('data', (chunk: Buffer) => {
      pending += chunk.toString('utf8');
      const complete = pending.split('\n');
      pending = complete.pop() ?? '';
      for (const line of complete) {
        const restart = /v2ray exited with status .*restarting in .*$/.exec(line);
        if (restart) onNotice({ hostId, kind: 'egress_restarted', message: restart[0] });
      }
    });
    this.docker.modem.demuxStream(logs, lines, lines);
    logs.on('end', () => lines.end());
    return logs;
  }

  // ------------------------------------------------------------------ lifecycle steps

  private async startNow(
    spec: WorkspaceSpec,
    upstream: UpstreamSpec,
    progress: ProgressReporter,
    signal?: AbortSignal,
  ): Promise<WorkspaceEndpoints> {
    // Cancelled while waiting for its turn: nothing was touched yet.
    if (signal?.aborted) throw startCancelled();
    const began = Date.now();
    const made: StartMade = { volumes: [], workspaceId: null };
    const step = async (percent: number, stage: string) => {
      if (signal?.aborted) throw startCancelled();
      await progress(percent, stage);
    };
    try {
      await step(5, 'checking the images');
      await this.requireImages();
      await step(10, `resolving the upstream ${upstream.config.server}`);
      const serverIp = await resolveServer(upstream.config.server, signal);
      await step(15, 'preparing the volumes and the uplink network');
      const { hostAddress } = await this.ensureUplink();
      made.volumes = await this.ensureVolumes(spec.hostId);
      await this.writeGatewayFiles(spec.hostId, upstream, serverIp, hostAddress);
      await step(25, 'starting the egress gateway and the workspace');
      const previousWorkspace = (await this.find(spec.hostId, 'workspace'))?.id;
      // Side by side: the workspace has no network at all until it is linked, after the gateway is ready.
      // Both are awaited even when one fails, so the clean-up below cannot miss a container still starting.
      const [gateway, workspace] = await settleAll([
        this.recreateGateway(spec.hostId).then((id) => this.waitForGateway(id, null, signal)),
        this.prepareWorkspace(spec).then((id) => {
          if (id !== previousWorkspace) made.workspaceId = id;
          return this.startContainer(id);
        }),
      ]);
      await step(60, 'linking the workspace to its egress gateway');
      await linkWorkspace(gateway.pid, workspace.pid);
      await step(70, `verifying the path through ${upstream.label} (${upstream.exitIp})`);
      if (!gateway.uplinkAddress)
        throw new RuntimeError('network_setup_failed', 'the egress gateway has no uplink address');
      await verifyEgressPath(
        {
          workspacePid: workspace.pid,
          gatewayPid: gateway.pid,
          exitIp: upstream.exitIp,
          uplinkHostAddress: hostAddress,
        },
        this.plan,
        { ...this.checkOptions(), signal },
      );
      // sshd has usually been up for a while by now; this also proves the relay.
      await step(90, 'waiting for sshd');
      const endpoints = endpointsAt(gateway.uplinkAddress);
      await this.waitForSsh(endpoints.ssh.host, workspace.id, signal);
      await progress(100, `running through ${upstream.label}, verified in ${Date.now() - began} ms`);
      return endpoints;
    } catch (error) {
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
    if (gateway) await this.removeContainer(gateway.id);
    if (made.workspaceId) await this.removeContainer(made.workspaceId);
    else await this.stopNow(hostId);
    for (const volume of made.volumes) await this.docker.getVolume(volume).remove().catch(ignoreStatus(404));
    await rm(this.gatewayDir(hostId), { recursive: true, force: true });
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
        await this.docker
          .getContainer(container.id)
          .stop({ t: this.timeouts.stopSeconds })
          .catch(ignoreStatus(304, 404));
      }
    }
  }

  private async relink(hostId: string): Promise<void> {
    await this.exclusive(hostId, async () => {
      const workspace = await this.find(hostId, 'workspace');
      const gateway = await this.find(hostId, 'egress-gateway');
      if (!workspace?.running || !gateway?.running || (await workspaceLinked(workspace.pid, gateway.pid)))
        return;
      // Linking waits for the gateway's kill switch and v2ray, as at start.
      const ready = await this.waitForGateway(gateway.id, null);
      await linkWorkspace(ready.pid, workspace.pid);
    });
  }

  // ------------------------------------------------------------------ containers

  private async recreateGateway(hostId: string): Promise<string> {
    // A fresh gateway every start: its namespace, ruleset and image are then exactly the current ones.
    const old = await this.find(hostId, 'egress-gateway');
    if (old) await this.docker.getContainer(old.id).remove({ force: true, v: true });
    const { egress } = this.options;
    const limits = this.options.gatewayLimits ?? { memoryMb: 256, pids: 128 };
    const binds = [`${this.gatewayDir(hostId)}:/etc/ccp-egress:ro`];
    if (egress.caFile) binds.push(`${path.resolve(egress.caFile)}:${CA_IN_GATEWAY}:ro`);
    const sysctls = {
      'net.ipv4.ip_forward': '0',
      'net.ipv6.conf.all.disable_ipv6': '1',
      'net.ipv6.conf.default.disable_ipv6': '1',
      // v2ray's DNS inbound binds the link address before the link exists (it is made after the gateway is
      // up).
      'net.ipv4.ip_nonlocal_bind': '1',
    };
    const container = await this.docker.createContainer({
      name: `ccp-egress-${hostId}`,
      Image: this.options.images.egressGateway,
      Hostname: 'ccp-egress',
      Labels: { [HOST_LABEL]: hostId, [ROLE_LABEL]: 'egress-gateway', [OWNER_LABEL]: this.owner },
      Env: [
        `EGRESS_TPROXY_MARK=0x${GATEWAY_NETWORK.tproxyMark.toString(16)}`,
        `EGRESS_TPROXY_TABLE=${GATEWAY_NETWORK.tproxyRouteTable}`,
        ...relayEnvironment(),
        // The entrypoint refuses to start unless each of these holds.
        `EGRESS_SYSCTLS=${Object.entries(sysctls)
          .map(([key, value]) => `${key}=${value}`)
          .join(' ')}`,
        // v2ray (Go) then trusts the probe's private CA for DNS-over-HTTPS.
        ...(egress.caFile ? [`SSL_CERT_FILE=${CA_IN_GATEWAY}`] : []),
      ],
      HostConfig: {
        Init: true,
        NetworkMode: UPLINK_NETWORK,
        CapDrop: ['ALL'],
        CapAdd: ['NET_ADMIN', 'NET_BIND_SERVICE', 'SETUID', 'SETGID', 'KILL'],
        SecurityOpt: ['no-new-privileges'],
        Sysctls: sysctls,
        Binds: binds,
        Memory: limits.memoryMb * 1024 * 1024,
        MemorySwap: limits.memoryMb * 1024 * 1024,
        PidsLimit: limits.pids,
        RestartPolicy: { Name: 'unless-stopped' },
      },
    });
    await container.start();
    return container.id;
  }

  /**
   * The workspace container, made when missing or made from another spec; its volumes are kept either way. A
   * newer image alone does not replace it (what users installed outside their home stays until a rebuild).
   */
  private async prepareWorkspace(spec: WorkspaceSpec): Promise<string> {
    await this.ensureVolumes(spec.hostId);
    const resolvConf = await this.ensureResolvConf();
    const mountsDir = await this.prepareFolderMountsDir(spec.hostId);
    const specHash = createHash('sha256')
      .update(JSON.stringify([spec.linuxUser, spec.authorizedKey, spec.limits, mountsDir]))
      .digest('hex');
    const existing = await this.find(spec.hostId, 'workspace');
    if (existing?.labels[SPEC_LABEL] === specHash && existing.labels[OWNER_LABEL] === this.owner)
      return existing.id;
    if (existing) await this.docker.getContainer(existing.id).remove({ force: true, v: true });
    const memory = spec.limits.memoryMb * 1024 * 1024;
    const hostname = `ccp-${spec.shortId.toLowerCase().replace(/[^a-z0-9-]/g, '-')}`.slice(0, 63);
    const container = await this.docker.createContainer({
      name: `ccp-ws-${spec.hostId}`,
      Image: this.options.images.workspace,
      Hostname: hostname,
      Labels: {
        [HOST_LABEL]: spec.hostId,
        [ROLE_LABEL]: 'workspace',
        [SPEC_LABEL]: specHash,
        [OWNER_LABEL]: this.owner,
      },
      Env: [
        `WORKSPACE_USER=${spec.linuxUser}`,
        `WORKSPACE_UID=${WORKSPACE_UID}`,
        `WORKSPACE_AUTHORIZED_KEYS=${spec.authorizedKey}`,
        // noVNC is served on the link only: the relay in the egress gateway is its one way in.
        `WORKSPACE_DESKTOP_ADDRESS=${WORKSPACE_LINK.workspaceAddress}`,
        `WORKSPACE_DESKTOP_PASSWORD_FILE=${DESKTOP_PASSWORD_FILE}`,
      ],
      HostConfig: {
        Init: true,
        // No Docker networking at all: no embedded resolver (127.0.0.11), no bridge; the link comes from us.
        NetworkMode: 'none',
        // Without a network Docker leaves the hostname out of /etc/hosts, and sudo would then ask the tunnel.
        ExtraHosts: [`${hostname}:127.0.1.1`],
        CapDrop: ['ALL'],
        // sshd (privilege separation, chroot, PTY ownership, audit records) and a sudo that is a useful root;
        // image/README.md. Never NET_ADMIN, NET_RAW or SYS_ADMIN.
        CapAdd: [
          'SETUID',
          'SETGID',
          'SYS_CHROOT',
          'CHOWN',
          'AUDIT_WRITE',
          'DAC_OVERRIDE',
          'FOWNER',
          'FSETID',
          'KILL',
        ],
        Sysctls: {
          'net.ipv6.conf.all.disable_ipv6': '1',
          'net.ipv6.conf.default.disable_ipv6': '1',
          // websockify binds the link address, which exists only once the link is made (after the start).
          'net.ipv4.ip_nonlocal_bind': '1',
        },
        Memory: memory,
        MemorySwap: memory,
        NanoCpus: Math.round(spec.limits.cpus * 1e9),
        PidsLimit: spec.limits.pids,
        ShmSize: 256 * 1024 * 1024,
        Mounts: [
          { Type: 'volume', Source: homeVolume(spec.hostId), Target: `/home/${spec.linuxUser}` },
          { Type: 'volume', Source: hostKeysVolume(spec.hostId), Target: '/etc/ssh/hostkeys' },
          { Type: 'bind', Source: resolvConf, Target: '/etc/resolv.conf', ReadOnly: true },
        ],
        // Read-only: only the gateway makes mount points there. Binds (not Mounts) so that dockerd recreates a
        // missing directory when it restarts the container on its own (it lives under /run by default).
        Binds: mountsDir ? [`${mountsDir}:${MOUNTS_IN_WORKSPACE}:ro,rslave`] : [],
        RestartPolicy: { Name: 'unless-stopped' },
      },
    });
    // Before it starts: the desktop's supervisor reads it when it starts the VNC server.
    await container.putArchive(desktopPasswordArchive(spec.desktopPassword), { path: '/' });
    return container.id;
  }

  /** The host's directory for folder mounts, or null when mounts made there would not reach the workspace. */
  private async prepareFolderMountsDir(hostId: string): Promise<string | null> {
    const root = this.options.folderMountsDir;
    if (!root) return null;
    const dir = path.join(root, hostId);
    await makeTraversableDir(dir);
    return propagatesToContainers(dir) ? dir : null;
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
    while (Date.now() < until) {
      if (signal?.aborted) throw startCancelled();
      const facts = await this.inspect(id);
      if (!facts?.running) break;
      const pid = await v2rayPid(facts.pid);
      if (
        pid !== null &&
        pid !== previousV2ray &&
        (await listensOnTcp(facts.pid, GATEWAY_NETWORK.transparentPort))
      )
        return facts;
      await delay(20);
    }
    throw new RuntimeError('egress_gateway_failed', await this.exitReport(id, 'the egress gateway'));
  }

  /** Until the workspace's sshd greets through the relay, i.e. from where the SSH proxy will connect. */
  private async waitForSsh(host: string, workspaceId: string, signal?: AbortSignal): Promise<void> {
    const until = Date.now() + this.timeouts.readyMs;
    while (Date.now() < until) {
      if (signal?.aborted) throw startCancelled();
      if (await sshBanner(host, WORKSPACE_PORTS.ssh)) return;
      const facts = await this.inspect(workspaceId);
      if (!facts?.running)
        throw new RuntimeError('workspace_failed', await this.exitReport(workspaceId, 'the workspace'));
      await delay(50);
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
      .then((buffer) => demuxLogs(buffer as unknown as Buffer))
      .catch(() => '');
    return `${what} ${state}${logs ? `: ${logs}` : ''}`;
  }

  private async find(hostId: string, role: Role): Promise<ContainerFacts | null> {
    const [summary] = await this.docker.listContainers({
      all: true,
      filters: { label: [`${HOST_LABEL}=${hostId}`, `${ROLE_LABEL}=${role}`] },
    });
    return summary ? this.inspect(summary.Id) : null;
  }

  private async inspect(id: string): Promise<ContainerFacts | null> {
    try {
      const info = await this.docker.getContainer(id).inspect();
      return {
        id: info.Id,
        running: info.State.Running && !info.State.Restarting && info.State.Pid > 0,
        pid: info.State.Pid,
        uplinkAddress: info.NetworkSettings.Networks[UPLINK_NETWORK]?.IPAddress || null,
        labels: info.Config.Labels ?? {},
        image: info.Config.Image,
      };
    } catch (error) {
      if (statusCode(error) === 404) return null;
      throw error;
    }
  }

  // ------------------------------------------------------------------ images, volumes, network, files

  async images(): Promise<ImageStatus[]> {
    const out: ImageStatus[] = [];
    for (const [name, tag] of [
      ['workspace', this.options.images.workspace],
      ['egress-gateway', this.options.images.egressGateway],
    ] as const) {
      try {
        const image = await this.docker.getImage(tag).inspect();
        out.push({ name, tag, present: true, created_at: image.Created, size_bytes: image.Size });
      } catch (error) {
        if (statusCode(error) !== 404) throw error;
        out.push({ name, tag, present: false, created_at: null, size_bytes: null });
      }
    }
    return out;
  }

  private async requireImages(): Promise<void> {
    for (const tag of [this.options.images.workspace, this.options.images.egressGateway]) {
      try {
        await this.docker.getImage(tag).inspect();
      } catch (error) {
        if (statusCode(error) !== 404) throw error;
        const variant = /^ccp-workspace:(test|full)-/.exec(this.options.images.workspace)?.[1] ?? 'full';
        throw new RuntimeError(
          'image_missing',
          `the image ${tag} is not built: run \`image/build.sh --variant ${variant} all\` as root`,
        );
      }
    }
  }

  /** Makes the host's volumes where missing; returns the names of those it made. */
  private async ensureVolumes(hostId: string): Promise<string[]> {
    const made: string[] = [];
    for (const [name, role] of [
      [homeVolume(hostId), 'home'],
      [hostKeysVolume(hostId), 'host-keys'],
    ] as const) {
      try {
        await this.docker.getVolume(name).inspect();
      } catch (error) {
        if (statusCode(error) !== 404) throw error;
        await this.docker.createVolume({
          Name: name,
          Labels: { [HOST_LABEL]: hostId, [ROLE_LABEL]: role, [OWNER_LABEL]: this.owner },
        });
        made.push(name);
      }
    }
    return made;
  }

  /**
   * The uplink bridge (made once) and the host's address on it: the relay's only client, the canary's home.
   */
  private ensureUplink(): Promise<{ hostAddress: string }> {
    const next = this.uplinkQueue
      .catch(() => undefined)
      .then(async () => {
        const network = this.docker.getNetwork(UPLINK_NETWORK);
        let info: { IPAM?: { Config?: { Gateway?: string }[] } };
        try {
          info = await network.inspect();
        } catch (error) {
          if (statusCode(error) !== 404) throw error;
          await this.docker.createNetwork({
            Name: UPLINK_NETWORK,
            Driver: 'bridge',
            CheckDuplicate: true,
            Labels: { [ROLE_LABEL]: 'uplink' },
            Options: {
              'com.docker.network.bridge.name': UPLINK_NETWORK,
              // Egress gateways have nothing to say to each other.
              'com.docker.network.bridge.enable_icc': 'false',
            },
          });
          info = await network.inspect();
        }
        const hostAddress = info.IPAM?.Config?.find((config) => net.isIPv4(config.Gateway ?? ''))?.Gateway;
        if (!hostAddress)
          throw new RuntimeError(
            'network_setup_failed',
            `the ${UPLINK_NETWORK} network has no IPv4 gateway address`,
          );
        return { hostAddress };
      });
    this.uplinkQueue = next;
    return next;
  }

  private gatewayDir(hostId: string): string {
    return path.join(this.runtimeDir, 'egress', hostId);
  }

  /** Writes both files of the egress gateway; each replaces the old one in one rename, ready for SIGHUP. */
  private async writeGatewayFiles(
    hostId: string,
    upstream: UpstreamSpec,
    serverIp: string,
    relaySource: string,
  ): Promise<void> {
    let files: { v2ray: string; ruleset: string };
    try {
      files = renderEgressGatewayFiles({
        upstream: { config: upstream.config, serverIp },
        dns: tunnelDns(this.options.egress),
        relaySource,
      });
    } catch (error) {
      throw new RuntimeError('invalid_upstream', `the upstream cannot be used: ${(error as Error).message}`);
    }
    const dir = this.gatewayDir(hostId);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    // Root-only is enough: the entrypoint reads both as root and hands v2ray its config on stdin.
    for (const [name, text] of [
      ['ruleset.nft', files.ruleset],
      ['v2ray.json', files.v2ray],
    ] as const) {
      const file = path.join(dir, name);
      await writeFile(`${file}.new`, text, { mode: 0o600 });
      await rename(`${file}.new`, file);
    }
  }

  /** One resolv.conf for every workspace: the resolver is always the gateway's end of the link. */
  private async ensureResolvConf(): Promise<string> {
    const file = path.join(this.runtimeDir, 'workspace-resolv.conf');
    const text = `nameserver ${WORKSPACE_LINK.gatewayAddress}\noptions timeout:2 attempts:2\n`;
    const current = await readFile(file, 'utf8').catch(() => null);
    if (current !== text) {
      await mkdir(this.runtimeDir, { recursive: true, mode: 0o755 });
      // Written in place, not renamed: running workspaces bind-mount this very inode.
      await writeFile(file, text, { mode: 0o644 });
    }
    return file;
  }

  private checkOptions() {
    return {
      nodeCommand: this.options.nodeCommand ?? process.execPath,
      httpTimeoutMs: this.timeouts.httpMs,
      dnsTimeoutMs: this.timeouts.dnsMs,
    };
  }

  // ------------------------------------------------------------------ plumbing

  /** One operation at a time per host (tasks, switches and the restart watcher all go through here). */
  private exclusive<T>(hostId: string, work: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(hostId) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(work);
    const tail = next.catch(() => undefined);
    this.queues.set(hostId, tail);
    void tail.then(() => {
      if (this.queues.get(hostId) === tail) this.queues.delete(hostId);
    });
    return next;
  }

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
  const { memoryMb, cpus, pids } = spec.limits;
  if (!(memoryMb >= 64 && cpus > 0 && pids >= 32))
    throw new RuntimeError('invalid_spec', `limits too small: ${JSON.stringify(spec.limits)}`);
}

const homeVolume = (hostId: string) => `ccp-home-${hostId}`;
const hostKeysVolume = (hostId: string) => `ccp-hostkeys-${hostId}`;

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

/** The egress gateway's current v2ray PID, read from its file system through /proc (no exec into it). */
async function v2rayPid(gatewayPid: number): Promise<number | null> {
  const text = await readFile(`/proc/${gatewayPid}/root/run/ccp-egress/v2ray.pid`, 'utf8').catch(() => '');
  const pid = Number.parseInt(text, 10);
  return Number.isInteger(pid) && pid > 0 ? pid : null;
}

function sshBanner(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    let banner = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.on('data', (chunk: Buffer) => {
      banner += chunk.toString('latin1');
      if (banner.length >= 4) done(banner.startsWith('SSH-'));
    });
    socket.on('error', () => done(false));
    socket.on('close', () => done(false));
  });
}

/** Docker's log stream without a TTY: 8-byte frame headers (stream, 0, 0, 0, length) before each chunk. */
function demuxLogs(buffer: Buffer): string {
  const parts: Buffer[] = [];
  let offset = 0;
  while (offset + 8 <= buffer.length) {
    const length = buffer.readUInt32BE(offset + 4);
    parts.push(buffer.subarray(offset + 8, offset + 8 + length));
    offset += 8 + length;
  }
  return Buffer.concat(parts).toString('utf8').trim().split('\n').slice(-8).join(' | ');
}

interface DockerEvent {
  Actor?: { ID?: string; Attributes?: Record<string, string> };
}

function readEvents(stream: NodeJS.ReadableStream, onEvent: (event: DockerEvent) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    let pending = '';
    stream.on('data', (chunk: Buffer) => {
      pending += chunk.toString('utf8');
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) if (line.trim()) onEvent(JSON.parse(line) as DockerEvent);
    });
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.on('error', reject);
  });
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

function ignoreStatus(...codes: number[]) {
  return (error: unknown) => {
    if (!codes.includes(statusCode(error) ?? 0)) throw error;
  };
}

function asRuntimeError(error: unknown): RuntimeError {
  if (error instanceof RuntimeError) return error;
  if (error instanceof CommandError) return new RuntimeError('network_setup_failed', error.message);
  const failure = error as NodeJS.ErrnoException & { statusCode?: number };
  if (failure.syscall === 'connect' || failure.code === 'ECONNREFUSED' || failure.code === 'EACCES') {
    return new RuntimeError(
      'runtime_unavailable',
      `the container engine is not reachable: ${failure.message}`,
    );
  }
  const message = failure.statusCode
    ? `container engine: ${failure.message}`
    : String(failure.message ?? error);
  return new RuntimeError('runtime_failed', message);
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
