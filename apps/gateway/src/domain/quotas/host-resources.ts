import type { HostResources, ResourceAlert, ResourceDefaults } from '@ccp/api';
import type { WorkspaceLimits } from '../../runtime/workspace-runtime.js';
import type { HostRow, HostWithOwner } from '../../store/hosts-repository.js';
import { effectiveResources } from './quota-arithmetic.js';

/** A host's own resources as stored (null: it follows a default). */
export function hostOverrides(
  row: Pick<HostRow, 'cpus' | 'memory_mb' | 'pids' | 'home_mb'>,
): ResourceDefaults {
  return { cpus: row.cpus, memory_mb: row.memory_mb, pids: row.pids, home_mb: row.home_mb };
}

/** The defaults of a host's owner, as read with the host. */
export function ownerDefaults(row: HostWithOwner): ResourceDefaults {
  return {
    cpus: row.owner_default_cpus,
    memory_mb: row.owner_default_memory_mb,
    pids: row.owner_default_pids,
    home_mb: row.owner_default_home_mb,
  };
}

/** What a host runs with: its own, else its owner's default, else the gateway's (WORKSPACE_CPUS, ...). */
export function resourcesOf(row: HostWithOwner, global: HostResources): HostResources {
  return effectiveResources(hostOverrides(row), ownerDefaults(row), global);
}

export function workspaceLimits(resources: HostResources): WorkspaceLimits {
  return {
    cpus: resources.cpus,
    memoryMb: resources.memory_mb,
    pids: resources.pids,
    homeMb: resources.home_mb,
  };
}

/** The alerts the last check stored for a host. */
export function alertsOf(row: Pick<HostRow, 'resource_alerts'>): ResourceAlert[] {
  if (!row.resource_alerts) return [];
  try {
    return JSON.parse(row.resource_alerts) as ResourceAlert[];
  } catch {
    return [];
  }
}

/** Statuses whose host counts as running for the quotas: it runs, or is on its way to or from it. */
export const LIVE_STATUSES = ['starting', 'running', 'stopping'];
