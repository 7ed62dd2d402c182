import type { EgressPolicy, Host, HostResources, HostStatus, SseMessage } from '@ccp/api';
import { isoOut } from '../../shared/clock.js';
import type { BindingDetail, HostsRepository, HostWithOwner } from '../../store/hosts-repository.js';
import { effectiveEgressPolicy } from '../egress/egress-policy.js';
import { hostEgressState } from '../egress/host-egress-state.js';
import { passwordInTheClearWarning } from '../entry/download-transport.js';
import { alertsOf, resourcesOf } from '../quotas/host-resources.js';
import { lifecycleState } from './lifecycle-state.js';

export interface AccessSettings {
  publicHost: string;
  publicApiUrl: string;
  publicEntryUrl: string;
  sshProxyPort: number;
  /** The address of a host's desktop page in a portal: vnc/ builds it, the rules only place it in the view. */
  desktopUrl: (portal: 'admin' | 'user', hostId: string) => string;
  /** The gateway's resources of a host with none of its own or its owner's (WORKSPACE_CPUS, ...). */
  resourceDefaults: HostResources;
  /** The gateway-wide egress policy (EGRESS_POLICY), under users' defaults and hosts' own; null: none. */
  egressPolicyDefault: EgressPolicy | null;
}

/** Which binding carries the traffic: the oldest healthy one (the oldest when none is), the others standby. */
export function activeBinding<T extends { healthy: boolean }>(bindings: T[]): T | null {
  return bindings.find((b) => b.healthy) ?? bindings[0] ?? null;
}

/** The command that starts a host when needed and connects to it (the entry short link). */
export function accessCommand(access: AccessSettings, shortId: string): string {
  return `curl -fsSL ${access.publicEntryUrl}/entry/${shortId} | sh`;
}

/**
 * What the access command's script prints before it asks for the password, and the portal shows beside the
 * command: it fetches the script from the entry URL and sends the password to the API URL.
 */
export function accessCommandWarning(access: Pick<AccessSettings, 'publicApiUrl' | 'publicEntryUrl'>) {
  return passwordInTheClearWarning('The access command', [access.publicEntryUrl, access.publicApiUrl]);
}

/** The host's page in the user portal, where its owner can start it. */
export function portalHostUrl(access: AccessSettings, hostId: string): string {
  return `${access.publicApiUrl}/portal/hosts/${hostId}`;
}

/** The fields of a host's view that depend on whose portal shows it: its links lead into that portal. */
function portalFields(access: AccessSettings, portal: 'admin' | 'user', hostId: string) {
  return { vnc_url: access.desktopUrl(portal, hostId) };
}

/**
 * A live message as a user's stream carries it. Host messages are built once, in the admin's view; the owner
 * gets the user's view, so its links (the desktop's) work with a user's credentials.
 */
export function userSseMessage(message: SseMessage, access: AccessSettings): SseMessage {
  if (message.topic !== 'hosts' || message.payload === undefined) return message;
  const host = message.payload as Host;
  return { ...message, payload: { ...host, ...portalFields(access, 'user', host.id) } };
}

/** A host as an admin sees it in an event, its bindings read from the store. */
export async function adminHostView(
  hosts: Pick<HostsRepository, 'bindings'>,
  row: HostWithOwner,
  access: AccessSettings,
): Promise<Host> {
  return hostView(row, (await hosts.bindings([row.id])).get(row.id) ?? [], access, 'admin');
}

export function hostView(
  row: HostWithOwner,
  bindings: BindingDetail[],
  access: AccessSettings,
  portal: 'admin' | 'user',
): Host {
  const active = activeBinding(bindings);
  const entryUrl = `${access.publicEntryUrl}/entry/${row.short_id}`;
  return {
    id: row.id,
    short_id: row.short_id,
    user_id: row.user_id,
    username: row.username,
    status: row.status as HostStatus,
    image: row.image,
    bindings: bindings.map((b) => ({
      id: b.id,
      egress_ip_id: b.egress_ip_id,
      label: b.label,
      ip_address: b.ip_address,
      active: b.id === active?.id,
    })),
    node: row.node,
    access_command: accessCommand(access, row.short_id),
    access_warning: accessCommandWarning(access),
    entry_url: entryUrl,
    ssh_user: `${row.username}+${row.short_id}`,
    ssh_host: access.publicHost,
    ssh_port: access.sshProxyPort,
    ...portalFields(access, portal, row.id),
    last_error: row.last_error,
    created_at: isoOut(row.created_at),
    updated_at: isoOut(row.updated_at),
    started_at: isoOut(row.started_at),
    resources: resourcesOf(row, access.resourceDefaults),
    resource_alerts: alertsOf(row),
    lifecycle: lifecycleState(row),
    egress: hostEgressState(row),
    egress_policy: effectiveEgressPolicy(row, access.egressPolicyDefault),
  };
}

/** A Linux account name for the workspace: the username where it is valid, lower-cased. */
export function linuxUserFor(username: string): string {
  const name = username.toLowerCase().replace(/[^a-z0-9_-]/g, '_');
  return /^[a-z_]/.test(name) ? name.slice(0, 32) : `u${name}`.slice(0, 32);
}
