import { ALREADY_RUNNING, type Host, type Task } from '@ccp/api';

/**
 * The task a host's page shows, from its newest tasks (newest first): the newest that changed something. A
 * start or bootstrap that found the host running tells nothing about it, so it only shows when nothing else is.
 */
export function taskToShow(tasks: Task[]): Task | null {
  const changed = tasks.find((t) => !(t.status === 'succeeded' && t.message === ALREADY_RUNNING));
  return changed ?? tasks[0] ?? null;
}

/** Only an administrator can bind an egress IP: without one a host cannot start, whoever presses Start. */
export const canStart = (host: Pick<Host, 'bindings'>): boolean => host.bindings.length > 0;
export const NO_EGRESS_HINT = 'It has no egress IP, so it cannot start. Ask your administrator to bind one.';

/** What the owner of a failed host can do next: start it again, unless it cannot start at all. */
export function failedHostNextStep(host: Host): { canRetry: boolean; text: string } {
  if (!canStart(host)) return { canRetry: false, text: NO_EGRESS_HINT };
  return {
    canRetry: true,
    text: 'Press Start to try again. If it fails again, send your administrator the message above.',
  };
}

/** Whether the host's node stopped heartbeating: nothing reaches, starts or stops the host until that node returns. */
export const nodeLost = (host: Pick<Host, 'status'>): boolean => host.status === 'node_unavailable';

/** The tooltip of a `node unavailable` badge: the status name alone does not say what to expect. */
export const NODE_UNAVAILABLE_HINT =
  'Its node (the gateway on the machine that holds its containers and home) stopped heartbeating. ' +
  'The host cannot be reached, started or stopped until that node returns; it then gets its previous status back.';
