import { ApiError, type Host, type Role, type VncStatus } from '@ccp/api';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api } from '../api';
import { nodeLost } from '../host-state';
import { ActionButton, StatusBadge } from './ui';

/** What each desktop state means to the person looking at it. */
const MEANING: Record<VncStatus['status'], string> = {
  running: 'The desktop is up.',
  starting: 'The desktop is coming up…',
  stopped: 'The desktop is stopped. Start it to use it.',
  host_stopped: 'The host is not running: start the host first.',
  unavailable: 'This workspace has no desktop that can be controlled (an image without one).',
};

/**
 * Opens the host's desktop in a new tab. The tab opens at the click (one opened after a request would be taken
 * for a pop-up), then goes to the one-time link the gateway makes for this desktop: its ticket, good once within
 * a minute, becomes a path holding a pass for this desktop alone (never a cookie: cookies ignore ports), so the
 * account's token never goes in a URL. The link is followed on the page's own origin: the gateway that serves this
 * page (HTTP_PORT or DASHBOARD_PORT) also serves the desktop, whatever public address the link names.
 */
async function openDesktop(host: Host, scope: Role): Promise<void> {
  const tab = window.open('', '_blank');
  if (!tab) throw new Error('The browser did not open a new tab (a pop-up blocker?)');
  tab.opener = null;
  try {
    const link = new URL((await api[scope].hosts.vnc.ticket(host.id)).url);
    tab.location.replace(`${window.location.origin}${link.pathname}${link.search}`);
  } catch (error) {
    tab.close();
    throw error;
  }
}

export function OpenDesktopButton({
  host,
  scope,
  ready = true,
}: {
  host: Host;
  scope: Role;
  ready?: boolean;
}) {
  const open = useMutation({ mutationFn: () => openDesktop(host, scope) });
  const usable = host.status === 'running' && ready;
  return (
    <>
      <ActionButton
        kind="primary"
        pending={open.isPending}
        disabled={!usable}
        title={usable ? 'Opens in a new tab' : 'The host and its desktop must be running'}
        onClick={() => open.mutate()}
      >
        Open desktop
      </ActionButton>
      {open.isError ? (
        <p className="error" role="alert">
          Opening the desktop failed: {outcomeOf(open.error)}
        </p>
      ) : null}
    </>
  );
}

/** The failure of a start or restart: the API's reason with its code (409 host not running, 503 causes). */
function outcomeOf(error: unknown): string {
  if (error instanceof ApiError) return `${error.message} (${error.code})`;
  return error instanceof Error ? error.message : String(error);
}

/**
 * A host's browser desktop: its state, start and restart (each answers only once the desktop is up, so the
 * button shows progress until then, then the outcome), and the button that opens it.
 */
export function HostDesktop({ host, scope }: { host: Host; scope: Role }) {
  const client = useQueryClient();
  const key = ['vnc', host.id];
  const status = useQuery({
    queryKey: key,
    queryFn: () => api[scope].hosts.vnc.status(host.id),
    // No SSE topic carries the desktop: host changes re-read it (live-updates.ts); while it comes up by
    // itself (just after a host start) it is re-read every 2 s until it settles.
    refetchInterval: (query) => (query.state.data?.status === 'starting' ? 2000 : false),
  });
  const control = useMutation({
    mutationFn: async (action: 'start' | 'restart') => {
      const began = performance.now();
      const next = await api[scope].hosts.vnc[action](host.id);
      return { next, seconds: (performance.now() - began) / 1000 };
    },
    onSuccess: ({ next }) => client.setQueryData(key, next),
    onError: () => void client.invalidateQueries({ queryKey: key }),
  });
  const vnc = status.data;
  const hostRunning = host.status === 'running';
  return (
    <div className="desktop" data-testid="desktop">
      <div className="row wrap">
        <span>Desktop</span>
        {vnc ? <StatusBadge status={vnc.status} /> : <span className="hint">checking…</span>}
      </div>
      {vnc ? (
        <p className="hint">
          {vnc.status === 'host_stopped' && ['starting', 'rebuilding'].includes(host.status)
            ? 'The desktop comes up with the host.'
            : vnc.status === 'host_stopped' && nodeLost(host)
              ? 'The host is out of reach with its node: no desktop until the node returns.'
              : MEANING[vnc.status]}
          {vnc.auto_restart_limited
            ? ' It crashed 3 times within a minute, so the watchdog left it stopped.'
            : ''}
        </p>
      ) : null}
      {status.error ? (
        <p className="error" role="alert">
          {outcomeOf(status.error)}
        </p>
      ) : null}
      <div className="row wrap">
        <OpenDesktopButton host={host} scope={scope} ready={vnc?.running ?? false} />
        <ActionButton
          pending={control.isPending && control.variables === 'start'}
          disabled={!hostRunning || !vnc?.can_start || control.isPending}
          onClick={() => control.mutate('start')}
        >
          {control.isPending && control.variables === 'start' ? 'Starting desktop…' : 'Start desktop'}
        </ActionButton>
        <ActionButton
          pending={control.isPending && control.variables === 'restart'}
          disabled={!hostRunning || !vnc?.can_restart || control.isPending}
          onClick={() => control.mutate('restart')}
        >
          {control.isPending && control.variables === 'restart' ? 'Restarting desktop…' : 'Restart desktop'}
        </ActionButton>
      </div>
      {control.isSuccess ? (
        <p className="ok" role="status" data-testid="desktop-outcome">
          Desktop {control.variables === 'start' ? 'started' : 'restarted'} in{' '}
          {control.data.seconds.toFixed(1)} s.
        </p>
      ) : null}
      {control.isError ? (
        <p className="error" role="alert" data-testid="desktop-outcome">
          {control.variables === 'start' ? 'Start' : 'Restart'} failed: {outcomeOf(control.error)}
        </p>
      ) : null}
    </div>
  );
}
