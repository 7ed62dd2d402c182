import type { Host } from '@ccp/api';

/** What a host runs with, and what runs short on it now (memory near its limit, OOM kills, a nearly full home). */
export function HostResources({ host }: { host: Host }) {
  const r = host.resources;
  return (
    <>
      <p className="muted" data-testid="host-resources">
        {r.cpus} CPU{r.cpus === 1 ? '' : 's'} · {r.memory_mb} MiB memory · {r.pids} processes · {r.home_mb}{' '}
        MiB home
      </p>
      {host.resource_alerts.map((alert) => (
        <p key={alert.kind} className="error" role="alert" data-testid={`host-alert-${alert.kind}`}>
          {alert.message} (since {new Date(alert.since).toLocaleString()})
        </p>
      ))}
    </>
  );
}
