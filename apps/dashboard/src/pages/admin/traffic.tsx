import { useQuery } from '@tanstack/react-query';
import type { ReactNode } from 'react';
import { Link } from 'react-router';
import { api } from '../../api';
import { DataTable } from '../../components/data-table';
import { Loading, Section } from '../../components/ui';
import { bytes, when } from '../../format';
import { useAdminHosts, useEgressIps, useUsers } from '../../queries';

interface Row {
  id: string;
  name: ReactNode;
  sent_bytes: number;
  received_bytes: number;
}

function TrafficTable({ rows, label, testId }: { rows: Row[]; label: string; testId: string }) {
  if (rows.length === 0) return <p className="hint">Nothing counted yet.</p>;
  return (
    <DataTable
      testId={testId}
      columns={[label, 'Sent', 'Received', 'Total']}
      rows={rows}
      row={(r) => (
        <>
          <td>{r.name}</td>
          <td>{bytes(r.sent_bytes)}</td>
          <td>{bytes(r.received_bytes)}</td>
          <td>{bytes(r.sent_bytes + r.received_bytes)}</td>
        </>
      )}
    />
  );
}

/**
 * What left through the upstreams this month: per host, per egress IP and per user, as the egress gateways
 * counted it (the workspaces' own bytes, sampled every minute).
 */
export function Traffic() {
  const totals = useQuery({ queryKey: ['egress-traffic'], queryFn: () => api.admin.egressTraffic.totals() });
  const hosts = useAdminHosts();
  const egressIps = useEgressIps();
  const users = useUsers();
  if (!totals.data) return <Loading error={totals.error} />;
  const hostNames = new Map(hosts.data?.hosts.map((h) => [h.id, h.short_id]));
  const egressNames = new Map(egressIps.data?.egress_ips.map((e) => [e.id, `${e.label} (${e.ip_address})`]));
  const userNames = new Map(users.data?.users.map((u) => [u.id, u.username]));
  const { from, to } = totals.data;
  return (
    <>
      <h1>Traffic</h1>
      <p className="hint">
        From {when(from)} to {when(to)}, by the hour.
      </p>
      <Section title="Per host">
        <TrafficTable
          testId="traffic-hosts"
          label="Host"
          rows={totals.data.hosts.map((r) => ({
            ...r,
            id: r.host_id,
            name: hostNames.has(r.host_id) ? (
              <Link to={`/admin/hosts/${r.host_id}`}>{hostNames.get(r.host_id)}</Link>
            ) : (
              'removed host'
            ),
          }))}
        />
      </Section>
      <Section title="Per egress IP">
        <TrafficTable
          testId="traffic-egress-ips"
          label="Egress IP"
          rows={totals.data.egress_ips.map((r) => ({
            ...r,
            id: r.egress_ip_id,
            name: egressNames.get(r.egress_ip_id) ?? 'removed egress IP',
          }))}
        />
      </Section>
      <Section title="Per user">
        <TrafficTable
          testId="traffic-users"
          label="User"
          rows={totals.data.users.map((r) => ({
            ...r,
            id: r.user_id,
            name: userNames.has(r.user_id) ? (
              <Link to={`/admin/users/${r.user_id}`}>{userNames.get(r.user_id)}</Link>
            ) : (
              'removed user'
            ),
          }))}
        />
      </Section>
    </>
  );
}
