import type { HostStatus } from '@ccp/api';
import type { WorkspaceState } from '../../runtime/workspace-runtime.js';

/**
 * What a host should be. Commands record it: a start or stop through its task, which writes the record's status
 * (`desiredOf`); a delete, which runs no task, as `removed` with the reconciler while it removes the workspace.
 */
export type Desired = 'running' | 'stopped' | 'removed';

/** Why the reconciler looks at a host now: each occasion observes only what its rules read. */
export type Occasion =
  /** This gateway just started: the tasks it ran died with it, so no transitional status has a task behind it. */
  | 'restart'
  /** The periodic comparison of running hosts with the engine. */
  | 'check'
  /** This node joined again after it was removed: workspaces of hosts placed elsewhere meanwhile. */
  | 'rejoin'
  /** A binding or an egress IP's upstream changed: the active upstream is applied now. */
  | 'upstream-changed'
  /** The egress health round: the active upstream, which health decides, against the one in use. */
  | 'upstream-round';

export interface Observed {
  occasion: Occasion;
  /** The host's status in the database. */
  record: HostStatus;
  /** Where the record places the host: here, on another node, or on a node that stopped heartbeating. */
  node: 'local' | 'elsewhere' | 'unavailable';
  /** What this node's engine has for the host; `unreachable` when it did not answer, null when not asked. */
  engine: WorkspaceState | 'unreachable' | null;
  /** A task is queued or running for the host: it is left to it. */
  busy: boolean;
  /** The previous check found the workspace not running as well. */
  lostBefore: boolean;
  upstream: {
    /** The binding the host should leave through (the first healthy one), if any. */
    active: { egressIpId: string; healthy: boolean } | null;
    /** The egress IP this gateway applied to the running host; null when not known (started before it). */
    inUse: string | null;
    /** What runs has the active upstream's exit and config (a changed config or a reverted switch do not). */
    matches: boolean;
  };
}

export type Action =
  | { kind: 'none' }
  /** The workspace is not running for the first time: judged at the next check. */
  | { kind: 'suspect' }
  /** Not running at two checks in a row: stop what is left, mark the host failed (`workspace_lost`). */
  | { kind: 'fail-lost' }
  /** A status left by an interrupted task: stop what is left, mark the host stopped. */
  | { kind: 'settle-stopped' }
  /** An interrupted or lost workspace found after a restart: stop what is left, mark the host failed. */
  | { kind: 'settle-failed' }
  /** This engine still runs a host now placed on another node: stop it, keep its containers and home. */
  | { kind: 'stop-stale' }
  /** The host's own node applies the upstream: ask it. */
  | { kind: 'forward-switch' }
  /** Point the egress gateway at the active upstream. */
  | { kind: 'switch-upstream' }
  /** The egress IP in use failed its checks and another binding is active: say so, and switch to it. */
  | { kind: 'failover'; from: string; to: string };

const none: Action = { kind: 'none' };

/** The record's status as what the host should be: a start under way heads for running. */
export function desiredOf(record: HostStatus): Desired {
  return record === 'running' || record === 'starting' ? 'running' : 'stopped';
}

/** The one decision of the host lifecycle's reconciler: what to do about a host, from what is seen. */
export function decide(observed: Observed, desired: Desired): Action {
  if (desired === 'removed') return none; // the delete does it, and owns the host meanwhile
  if (observed.node === 'unavailable') return none;
  if (observed.node === 'elsewhere') return elsewhere(observed);
  if (observed.engine === 'unreachable') return none;
  switch (observed.occasion) {
    case 'restart':
      return afterRestart(observed, desired);
    case 'check':
      return check(observed, desired);
    case 'upstream-changed':
    case 'upstream-round':
      return upstream(observed);
    case 'rejoin':
      return none;
  }
}

function elsewhere(observed: Observed): Action {
  if (observed.occasion === 'upstream-changed')
    return observed.record === 'running' ? { kind: 'forward-switch' } : none;
  const sweepsEngine = observed.occasion === 'restart' || observed.occasion === 'rejoin';
  return sweepsEngine && observed.engine === 'running' ? { kind: 'stop-stale' } : none;
}

/** A status written before the restart is settled against the engine: nothing is left lying as running. */
function afterRestart({ record, engine }: Observed, desired: Desired): Action {
  if (record === 'running' && desired === 'running' && engine === 'running') return none;
  if (record === 'stopping') return { kind: 'settle-stopped' };
  const transitional = record === 'starting' || record === 'rebuilding';
  if (transitional && engine === 'stopped') return { kind: 'settle-stopped' };
  if (transitional || record === 'running') return { kind: 'settle-failed' };
  return none;
}

/** A running host whose workspace is not running twice in a row is lost (once may be a restart by the engine). */
function check({ record, engine, busy, lostBefore }: Observed, desired: Desired): Action {
  if (record !== 'running' || desired !== 'running' || busy || engine === 'running' || engine === null)
    return none;
  return lostBefore ? { kind: 'fail-lost' } : { kind: 'suspect' };
}

function upstream({ occasion, record, upstream: { active, inUse, matches } }: Observed): Action {
  if (record !== 'running' || !active) return none;
  const switchUpstream: Action = { kind: 'switch-upstream' };
  if (occasion === 'upstream-changed') return switchUpstream;
  // Started before this gateway (a restart, a crash): what its egress gateway has is not known here, so a healthy
  // active upstream is applied again; skipping the host would leave it on an upstream that failed, for good.
  if (inUse === null) return active.healthy ? switchUpstream : none;
  // Same egress IP: a changed config, or a switch that failed and left the old one, is applied (again).
  if (inUse === active.egressIpId) return matches ? none : switchUpstream;
  return { kind: 'failover', from: inUse, to: active.egressIpId };
}
