import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import type { EgressPolicy } from '@ccp/api';
import type Docker from 'dockerode';
import { pathCheckDestinations, tunnelDns } from '../egress/egress-verification.js';
import type { EgressSettings } from '../egress/settings.js';
import type { TunnelEngine } from '../egress/tunnel-engine.js';
import { checkUplinkPolicy, type UplinkPolicy } from '../egress/uplink-guard.js';
import {
  HOST_LABEL,
  homeVolume,
  hostKeysVolume,
  OWNER_LABEL,
  ROLE_LABEL,
  UPLINK_NETWORK,
  WORKSPACE_UID,
} from './container-specs.js';
import { type EgressGatewayFiles, renderEgressGatewayFiles, WORKSPACE_LINK } from './egress-gateway-files.js';
import { statusCode } from './engine-errors.js';
import { propagatesToContainers } from './folder-mount-points.js';
import { makeTraversableDir, writeReadableFile } from './handed-over-files.js';
import type { HomeVolumes } from './home-volumes.js';
import { RuntimeError, type UpstreamSpec } from './workspace-runtime.js';

/** Beside the gateway's files: not read by the gateway, by the host's guard on its uplink. */
const UPLINK_POLICY_FILE = 'uplink.json';
/** Beside them too: the egress policy they were written with, which a switch of upstream keeps. */
const EGRESS_POLICY_FILE = 'egress-policy.json';
/** Read by the gateway's entrypoint when present: the DNS filter's rules (image/README.md). */
const DNS_FILTER_FILE = 'dns-filter.rules';

export interface HostProvisioningOptions {
  docker: Docker;
  /** DATA_DIR/runtime: egress gateway configs and the workspaces' resolv.conf. */
  runtimeDir: string;
  owner: string;
  egress: EgressSettings;
  engine: TunnelEngine;
  folderMountsDir?: string;
  homes: HomeVolumes;
}

/** What a host needs around its containers: volumes, the uplink network, files on this machine. */
export class HostProvisioning {
  private uplinkQueue: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: HostProvisioningOptions) {}

  /**
   * Makes the host's volumes where missing, and mounts its home with at least `homeMb` (home-volumes.ts); returns
   * the names of the volumes it made. A home volume made before homes had a size stays as it was, unsized.
   */
  async ensureVolumes(hostId: string, homeMb: number): Promise<string[]> {
    const { docker, owner, homes } = this.options;
    const made: string[] = [];
    for (const [name, role] of [
      [homeVolume(hostId), 'home'],
      [hostKeysVolume(hostId), 'host-keys'],
    ] as const) {
      try {
        const info = await docker.getVolume(name).inspect();
        const device = (info.Options as Record<string, string> | null)?.device;
        if (role === 'home' && device === homes.mountPoint(hostId))
          await homes.ensure(hostId, homeMb, WORKSPACE_UID);
      } catch (error) {
        if (statusCode(error) !== 404) throw error;
        const sized =
          role === 'home'
            ? {
                Driver: 'local',
                DriverOpts: {
                  type: 'none',
                  o: 'bind',
                  device: await homes.ensure(hostId, homeMb, WORKSPACE_UID),
                },
              }
            : {};
        await docker.createVolume({
          Name: name,
          ...sized,
          Labels: { [HOST_LABEL]: hostId, [ROLE_LABEL]: role, [OWNER_LABEL]: owner },
        });
        made.push(name);
      }
    }
    return made;
  }

  /**
   * The uplink bridge (made once) and the host's address on it: the relay's only client, the canary's home.
   * Calls are queued, so parallel starts never race to create it.
   */
  ensureUplink(): Promise<{ hostAddress: string }> {
    const { docker } = this.options;
    const next = this.uplinkQueue
      .catch(() => undefined)
      .then(async () => {
        const network = docker.getNetwork(UPLINK_NETWORK);
        let info: { IPAM?: { Config?: { Gateway?: string }[] } };
        try {
          info = await network.inspect();
        } catch (error) {
          if (statusCode(error) !== 404) throw error;
          await docker.createNetwork({
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

  gatewayDir(hostId: string): string {
    return path.join(this.options.runtimeDir, 'egress', hostId);
  }

  /**
   * Writes the egress gateway's files, each replacing the old one in one rename, ready for SIGHUP: with `policy`
   * (null: none), or else the policy they were last written with (the gateway-wide one before any).
   */
  async writeGatewayFiles(
    hostId: string,
    upstream: UpstreamSpec,
    serverIp: string,
    relaySource: string,
    policy?: EgressPolicy | null,
  ): Promise<void> {
    const applied = policy !== undefined ? policy : await this.readEgressPolicy(hostId);
    await this.writeFilesTo(
      this.gatewayDir(hostId),
      this.renderGatewayFiles(upstream, serverIp, relaySource, applied),
      applied,
    );
  }

  /**
   * What an egress gateway for this upstream and egress policy reads: the same for every host (a pooled gateway
   * fits any host that follows the same policy).
   */
  renderGatewayFiles(
    upstream: UpstreamSpec,
    serverIp: string,
    relaySource: string,
    policy: EgressPolicy | null,
  ): EgressGatewayFiles {
    try {
      return renderEgressGatewayFiles({
        engine: this.options.engine,
        upstream: { config: upstream.config, serverIp },
        dns: tunnelDns(this.options.egress),
        relaySource,
        policy,
        pathCheck: pathCheckDestinations(this.options.egress),
      });
    } catch (error) {
      throw new RuntimeError('invalid_upstream', `the upstream cannot be used: ${(error as Error).message}`);
    }
  }

  /** Writes an egress gateway's files, written with `policy`, into `dir` (the host's, or a pooled gateway's). */
  async writeFilesTo(dir: string, files: EgressGatewayFiles, policy: EgressPolicy | null): Promise<void> {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    // Root-only is enough: the entrypoint reads them as root and hands v2ray its config on stdin.
    for (const [name, text] of [
      ['ruleset.nft', files.ruleset],
      ['v2ray.json', files.v2ray],
      [DNS_FILTER_FILE, files.dnsFilter],
      [UPLINK_POLICY_FILE, JSON.stringify(files.uplink)],
      [EGRESS_POLICY_FILE, JSON.stringify(policy)],
    ] as const) {
      const file = path.join(dir, name);
      await writeFile(`${file}.new`, text, { mode: 0o600 });
      await rename(`${file}.new`, file);
    }
  }

  /** The egress policy the gateway's files were last written with; the gateway-wide one before any. */
  private async readEgressPolicy(hostId: string): Promise<EgressPolicy | null> {
    const text = await readFile(path.join(this.gatewayDir(hostId), EGRESS_POLICY_FILE), 'utf8').catch(
      () => null,
    );
    return text === null ? this.options.egress.policy : (JSON.parse(text) as EgressPolicy | null);
  }

  /**
   * What the host's guard on this gateway's uplink lets out (uplink-guard.ts), as the last start or switch
   * wrote it; null when the host never started here with a gateway of this version.
   */
  async readUplinkPolicy(hostId: string): Promise<UplinkPolicy | null> {
    const text = await readFile(path.join(this.gatewayDir(hostId), UPLINK_POLICY_FILE), 'utf8').catch(
      () => null,
    );
    return text === null ? null : checkUplinkPolicy(JSON.parse(text) as UplinkPolicy);
  }

  /**
   * One resolv.conf for every workspace: the resolver is always the gateway's end of the link. Asked again after
   * 1 s, three times: v2ray's DoH client now and then drops a question ("read/write on closed pipe", in one
   * start of 20-50 on machine A), and the question asked again is answered; an answer slower than a second
   * still counts, as glibc keeps listening for it.
   */
  async ensureResolvConf(): Promise<string> {
    const { runtimeDir } = this.options;
    const file = path.join(runtimeDir, 'workspace-resolv.conf');
    const text = `nameserver ${WORKSPACE_LINK.gatewayAddress}\noptions timeout:1 attempts:3\n`;
    const current = await readFile(file, 'utf8').catch(() => null);
    await makeTraversableDir(runtimeDir);
    // Written in place, not renamed: running workspaces bind-mount this very inode. The mode is set every time:
    // a file written by an older gateway under a strict umask is mended too.
    if (current !== text) await writeReadableFile(file, text);
    else await chmod(file, 0o644);
    return file;
  }

  /**
   * The egress TLS CA (EGRESS_TLS_CA_FILE) as the egress gateways mount it: a copy readable by their
   * unprivileged v2ray, whatever the mode of the operator's file (a CA certificate is public).
   */
  async ensureCaCopy(caFile: string): Promise<string> {
    const file = path.join(this.options.runtimeDir, 'egress-ca.pem');
    await makeTraversableDir(this.options.runtimeDir);
    await writeReadableFile(file, await readFile(caFile, 'utf8'));
    return file;
  }

  /** The host's directory for folder mounts, or null when mounts made there would not reach the workspace. */
  async prepareFolderMountsDir(hostId: string): Promise<string | null> {
    const root = this.options.folderMountsDir;
    if (!root) return null;
    const dir = path.join(root, hostId);
    await makeTraversableDir(dir);
    return propagatesToContainers(dir) ? dir : null;
  }
}
