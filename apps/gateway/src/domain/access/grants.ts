import type { Actor } from '@ccp/api';
import type { HostWithOwner } from '../../store/hosts-repository.js';
import type { TaskRow } from '../../store/tasks-repository.js';
import { errors } from '../errors.js';

/**
 * Proofs of authorization (Coder's dbauthz is the model: a read with no subject is refused). Every lifecycle, host,
 * task and desktop method takes one instead of a bare id, so forgetting to authorize does not compile; and each
 * checks at run time that what it got was made by `Access` (nothing else may call `mint`: the architecture test
 * holds that) and covers what it is about to do, so a forged or stretched one is refused as "not found".
 */

/** What may be done to a host. A user may do the listed ones to their own hosts; anything else is an admin's,
 * except SSH, which is the owner's only. `manage` is the gateway's own or an admin's: it covers every other.
 * `terminal` (the browser terminal) is like `desktop`: the owner's, and an admin's from the console. */
export type HostAction = 'view' | 'operate' | 'desktop' | 'terminal' | 'ssh' | 'manage';

declare const granted: unique symbol;

/** `actor` may do `action` to `host` (as the host was when this was made). */
export interface HostGrant {
  readonly [granted]: 'host';
  readonly host: HostWithOwner;
  readonly action: HostAction;
  readonly actor: Actor;
}

/** `actor` may read `task`. */
export interface TaskGrant {
  readonly [granted]: 'task';
  readonly task: TaskRow;
  readonly actor: Actor;
}

/** The gateway's own work (a reconcile, an expiry, a health round), named for the event log and for reading. */
export interface SystemGrant {
  readonly [granted]: 'system';
  readonly reason: string;
  readonly actor: Actor;
}

type Grant = HostGrant | TaskGrant | SystemGrant;

const made = new WeakSet<object>();

/** Only `Access` makes grants. */
export function mint<G extends Grant>(fields: Omit<G, typeof granted>, kind: G[typeof granted]): G {
  const grant = Object.freeze({ ...fields, [kindKey]: kind }) as unknown as G;
  made.add(grant);
  return grant;
}

const kindKey = Symbol('grant');

/** The host of a grant that covers `action`; anything else is "not found", like a host the caller may not see. */
export function hostOf(grant: HostGrant, action: HostAction): HostWithOwner {
  if (
    !isGrant(grant, 'host') ||
    !(grant.action === action || (grant.action === 'manage' && action !== 'ssh'))
  )
    throw errors.notFound('Host');
  return grant.host;
}

export function taskOf(grant: TaskGrant): TaskRow {
  if (!isGrant(grant, 'task')) throw errors.notFound('Task');
  return grant.task;
}

export function confirmSystem(grant: SystemGrant): SystemGrant {
  if (!isGrant(grant, 'system')) throw new Error("the gateway's own work needs a system grant from Access");
  return grant;
}

function isGrant(value: unknown, kind: Grant[typeof granted]): boolean {
  return (
    typeof value === 'object' &&
    value !== null &&
    made.has(value) &&
    (value as Record<symbol, unknown>)[kindKey] === kind
  );
}
