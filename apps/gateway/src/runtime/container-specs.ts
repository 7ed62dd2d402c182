import { createHash } from 'node:crypto';
import path from 'node:path';
import type { ContainerCreateOptions } from 'dockerode';
import { DECISION_LOG_BYTES, DECISION_LOG_DIR } from './decision-log.js';
import { DESKTOP_PASSWORD_FILE } from './desktop-secret.js';
import { GATEWAY_NETWORK, relayEnvironment, WORKSPACE_LINK } from './egress-gateway-files.js';
import { MOUNTS_IN_WORKSPACE } from './folder-mount-points.js';
import type { WorkspaceLimits, WorkspaceSpec } from './workspace-runtime.js';

/**
 * What a host's two containers are made of, as plain Docker create options: no engine calls here, so every
 * setting that keeps a workspace contained is testable without Docker.
 */

export const HOST_LABEL = 'cloud-cli-proxy.host';
export const ROLE_LABEL = 'cloud-cli-proxy.role';
/** The gateway (its DATA_DIR) that made a container: a gateway re-links only its own hosts, so two gateways on one
 * engine (staging beside production, parallel test runs) never touch each other's namespaces. */
export const OWNER_LABEL = 'cloud-cli-proxy.gateway';
/** Hash of what a workspace container was made from; another hash means it must be made again. */
export const SPEC_LABEL = 'cloud-cli-proxy.spec';
/**
 * On an egress gateway started ahead (egress-gateway-pool.ts): the upstream it was started for. It has no
 * HOST_LABEL (labels cannot change); the host that takes it renames it to egressGatewayName(hostId).
 */
export const POOL_LABEL = 'cloud-cli-proxy.pool';
/** Hash of a pooled gateway's files: a start takes it only when its own files would be the same. */
export const POOL_FILES_LABEL = 'cloud-cli-proxy.pool-files';
/** The shared uplink bridge of every egress gateway (not any one host's, so it carries no host label). */
export const UPLINK_NETWORK = 'ccp-uplink';

export const WORKSPACE_UID = 1000;
/** The desktop's control program in the workspace image (image/README.md, "Desktop"). */
export const DESKTOP_CONTROL = '/usr/local/sbin/ccp-desktop';
/** Its start and restart wait up to 20 s for the desktop; a little more for `docker exec` itself. */
export const DESKTOP_CONTROL_TIMEOUT_MS = 30_000;
const CA_IN_GATEWAY = '/usr/local/share/ccp-egress/ca.pem';

export type Role = 'workspace' | 'egress-gateway';

export const egressGatewayName = (hostId: string) => `ccp-egress-${hostId}`;
export const pooledGatewayName = (poolId: string) => `ccp-pool-${poolId}`;

/**
 * The host a container of ours belongs to: its HOST_LABEL, or, for a pooled egress gateway a host took, its
 * name (Docker's event attributes and inspect give it with or without the leading slash).
 */
export function hostOfContainer(labels: Record<string, string>, name: string | undefined): string | null {
  const labelled = labels[HOST_LABEL];
  if (labelled) return labelled;
  if (!labels[POOL_LABEL]) return null;
  return /^\/?ccp-egress-(.+)$/.exec(name ?? '')?.[1] ?? null;
}

export const homeVolume = (hostId: string) => `ccp-home-${hostId}`;
export const hostKeysVolume = (hostId: string) => `ccp-hostkeys-${hostId}`;

/**
 * The workspace's capabilities: sshd (privilege separation, chroot, PTY ownership, audit records) and a sudo
 * that is a useful root; image/README.md. Never NET_ADMIN, NET_RAW or SYS_ADMIN.
 */
export const WORKSPACE_CAPABILITIES = [
  'SETUID',
  'SETGID',
  'SYS_CHROOT',
  'CHOWN',
  'AUDIT_WRITE',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
] as const;

/**
 * The egress gateway's: nft, ip rules and v2ray's TPROXY/SO_MARK; the relay's and v2ray's ports; dropping to
 * their users; signalling them (image/README.md).
 */
export const EGRESS_GATEWAY_CAPABILITIES = [
  'NET_ADMIN',
  'NET_BIND_SERVICE',
  'SETUID',
  'SETGID',
  'KILL',
] as const;

const GATEWAY_SYSCTLS = {
  'net.ipv4.ip_forward': '0',
  'net.ipv6.conf.all.disable_ipv6': '1',
  'net.ipv6.conf.default.disable_ipv6': '1',
  // The DNS filter binds the link address before the link exists (it is made after the gateway is up).
  'net.ipv4.ip_nonlocal_bind': '1',
};

export interface EgressGatewayContainerParams {
  /** The host's id, or the pool's entry for a gateway started ahead (no host yet, no restart policy). */
  for: { hostId: string } | { pool: { id: string; egressIpId: string; filesKey: string } };
  image: string;
  owner: string;
  /** The host's directory holding the tunnel config and the ruleset. */
  configDir: string;
  /** The probe's private CA, when the egress settings name one. */
  caFile?: string;
  limits: { memoryMb: number; pids: number };
}

export function egressGatewayContainer(params: EgressGatewayContainerParams): ContainerCreateOptions {
  const binds = [`${params.configDir}:/etc/ccp-egress:ro`];
  if (params.caFile) binds.push(`${path.resolve(params.caFile)}:${CA_IN_GATEWAY}:ro`);
  const memory = params.limits.memoryMb * 1024 * 1024;
  const target = params.for;
  const pooled = 'pool' in target ? target.pool : null;
  return {
    name: 'pool' in target ? pooledGatewayName(target.pool.id) : egressGatewayName(target.hostId),
    Image: params.image,
    Hostname: 'ccp-egress',
    Labels: {
      ...('pool' in target
        ? { [POOL_LABEL]: target.pool.egressIpId, [POOL_FILES_LABEL]: target.pool.filesKey }
        : { [HOST_LABEL]: target.hostId }),
      [ROLE_LABEL]: 'egress-gateway',
      [OWNER_LABEL]: params.owner,
    },
    Env: [
      `EGRESS_TPROXY_MARK=0x${GATEWAY_NETWORK.tproxyMark.toString(16)}`,
      `EGRESS_TPROXY_TABLE=${GATEWAY_NETWORK.tproxyRouteTable}`,
      ...relayEnvironment(),
      // Where the DNS filter answers the workspace, and where it asks v2ray (renderEgressGatewayFiles).
      `EGRESS_DNS_FILTER_LISTEN=${WORKSPACE_LINK.gatewayAddress}:${GATEWAY_NETWORK.dnsPort}`,
      `EGRESS_DNS_FILTER_UPSTREAM=127.0.0.1:${GATEWAY_NETWORK.filteredDnsPort}`,
      // The entrypoint refuses to start unless each of these holds.
      `EGRESS_SYSCTLS=${Object.entries(GATEWAY_SYSCTLS)
        .map(([key, value]) => `${key}=${value}`)
        .join(' ')}`,
      // v2ray (Go) then trusts the probe's private CA for DNS-over-HTTPS.
      ...(params.caFile ? [`SSL_CERT_FILE=${CA_IN_GATEWAY}`] : []),
    ],
    HostConfig: {
      Init: true,
      NetworkMode: UPLINK_NETWORK,
      CapDrop: ['ALL'],
      CapAdd: [...EGRESS_GATEWAY_CAPABILITIES],
      SecurityOpt: ['no-new-privileges'],
      Sysctls: GATEWAY_SYSCTLS,
      Binds: binds,
      // The log of the egress policy's decisions (decision-log.ts), bounded, in the gateway's own memory.
      Tmpfs: { [DECISION_LOG_DIR]: `rw,nosuid,nodev,noexec,mode=1777,size=${DECISION_LOG_BYTES}` },
      Memory: memory,
      MemorySwap: memory,
      PidsLimit: params.limits.pids,
      // A pooled gateway that dockerd restarted would have a new, unguarded uplink port: it stays down, and is
      // given the host's policy when a host takes it (EGRESS_GATEWAY_RESTART).
      RestartPolicy: pooled ? { Name: 'no' } : EGRESS_GATEWAY_RESTART,
    },
  };
}

/** The restart policy of a host's egress gateway. */
export const EGRESS_GATEWAY_RESTART = { Name: 'unless-stopped' } as const;

export interface WorkspaceContainerParams {
  spec: WorkspaceSpec;
  image: string;
  owner: string;
  /** The one resolv.conf every workspace binds (HostProvisioning.ensureResolvConf). */
  resolvConf: string;
  /** The host's folder-mounts directory, or null when mounts would not reach the workspace. */
  mountsDir: string | null;
}

/** Hash of what a workspace container is made from (SPEC_LABEL): the image alone does not count. */
export function workspaceSpecHash(spec: WorkspaceSpec, mountsDir: string | null): string {
  return (
    createHash('sha256')
      // Not the limits: they are applied to the container in place (docker update), which keeps what is in it.
      .update(JSON.stringify([spec.linuxUser, spec.authorizedKey, mountsDir]))
      .digest('hex')
  );
}

/** A workspace's memory, CPU and process limits as Docker's create and update take them. */
export function workspaceLimitsConfig(limits: WorkspaceLimits) {
  const memory = limits.memoryMb * 1024 * 1024;
  return {
    Memory: memory,
    // No swap: past its memory a process is killed, not slowed down for every other host.
    MemorySwap: memory,
    NanoCpus: Math.round(limits.cpus * 1e9),
    PidsLimit: limits.pids,
  };
}

export function workspaceContainer(params: WorkspaceContainerParams): ContainerCreateOptions {
  const { spec, mountsDir } = params;
  const hostname = `ccp-${spec.shortId.toLowerCase().replace(/[^a-z0-9-]/g, '-')}`.slice(0, 63);
  return {
    name: `ccp-ws-${spec.hostId}`,
    Image: params.image,
    Hostname: hostname,
    // No network of Docker's at all: runc still gives the container a namespace of its own with loopback only,
    // and dockerd skips its network hook, a re-exec of dockerd inside every start (on machine A a `docker start`
    // took 170-180 ms and as much CPU with it, 80 ms and 70-75 without). Docker then writes no /etc/hosts: the
    // entrypoint does. linkWorkspace refuses a workspace whose namespace is not its own.
    NetworkDisabled: true,
    Labels: {
      [HOST_LABEL]: spec.hostId,
      [ROLE_LABEL]: 'workspace',
      [SPEC_LABEL]: workspaceSpecHash(spec, mountsDir),
      [OWNER_LABEL]: params.owner,
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
      CapDrop: ['ALL'],
      CapAdd: [...WORKSPACE_CAPABILITIES],
      Sysctls: {
        'net.ipv6.conf.all.disable_ipv6': '1',
        'net.ipv6.conf.default.disable_ipv6': '1',
        // websockify binds the link address, which exists only once the link is made (after the start).
        'net.ipv4.ip_nonlocal_bind': '1',
      },
      ...workspaceLimitsConfig(spec.limits),
      ShmSize: 256 * 1024 * 1024,
      Mounts: [
        { Type: 'volume', Source: homeVolume(spec.hostId), Target: `/home/${spec.linuxUser}` },
        { Type: 'volume', Source: hostKeysVolume(spec.hostId), Target: '/etc/ssh/hostkeys' },
        { Type: 'bind', Source: params.resolvConf, Target: '/etc/resolv.conf', ReadOnly: true },
      ],
      // Read-only: only the gateway makes mount points there. Binds (not Mounts) so that dockerd recreates a
      // missing directory when it restarts the container on its own (it lives under /run by default).
      Binds: mountsDir ? [`${mountsDir}:${MOUNTS_IN_WORKSPACE}:ro,rslave`] : [],
      RestartPolicy: { Name: 'unless-stopped' },
    },
  };
}
