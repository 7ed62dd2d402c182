import { useQuery } from '@tanstack/react-query';
import { Link } from 'react-router';
import { api } from '../../api';
import { DataTable } from '../../components/data-table';
import { Loading, Section } from '../../components/ui';
import { bytes, when } from '../../format';
import { useAdminHosts, useEgressIps, useUsers } from '../../queries';

interface Breakdown {
  /** What a row is: "host", "egress IP", "user". */
  noun: string;
  rows: { id: string; sent_bytes: number; received_bytes: number }[];
  names: Map<string, string>;
  /** Where the pages of these things are (`<pages>/<id>`). */
  pages: string;
}

/** One breakdown of the month's bytes: each row named and linked to its page, or said to be removed. */
function TrafficSection({ noun, rows, names, pages }: Breakdown) {
  const name = (id: string) => {
    const known = names.get(id);
    return known === undefined ? `removed ${noun}` : <Link to={`${pages}/${id}`}>{known}</Link>;
  };
  return (
    <Section title={`Per ${noun}`}>
      {rows.length === 0 ? (
        <p className="hint">Nothing counted yet.</p>
      ) : (
        <DataTable
          testId={`traffic-${noun.toLowerCase().replaceAll(' ', '-')}s`}
          columns={[noun.charAt(0).toUpperCase() + noun.slice(1), 'Sent', 'Received', 'Total']}
          rows={rows}
          row={(r) => (
            <>
              <td>{name(r.id)}</td>
              <td>{bytes(r.sent_bytes)}</td>
              <td>{bytes(r.received_bytes)}</td>
              <td>{bytes(r.sent_bytes + r.received_bytes)}</td>
            </>
          )}
        />
      )}
    </Section>
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
  const { from, to } = totals.data;
  const breakdowns: Breakdown[] = [
    {
      noun: 'host',
      rows: totals.data.hosts.map((r) => ({ ...r, id: r.host_id })),
      names: new Map(hosts.data?.hosts.map((h) => [h.id, h.short_id])),
      pages: '/admin/hosts',
    },
    {
      noun: 'egress IP',
      rows: totals.data.egress_ips.map((r) => ({ ...r, id: r.egress_ip_id })),
      names: new Map(egressIps.data?.egress_ips.map((e) => [e.id, `${e.label} (${e.ip_address})`])),
      pages: '/admin/egress-ips',
    },
    {
      noun: 'user',
      rows: totals.data.users.map((r) => ({ ...r, id: r.user_id })),
      names: new Map(users.data?.users.map((u) => [u.id, u.username])),
      pages: '/admin/users',
    },
  ];
  return (
    <>
      <h1>Traffic</h1>
      <p className="hint">
        From {when(from)} to {when(to)}, by the hour.
      </p>
      {breakdowns.map((breakdown) => (
        <TrafficSection key={breakdown.noun} {...breakdown} />
      ))}
    </>
  );
}
