import { useQuery } from '@tanstack/react-query';
import { Link } from 'react-router';
import { api } from '../../api';
import { DataTable } from '../../components/data-table';
import { Loading, Section } from '../../components/ui';
import { bytes, when } from '../../format';
import { useAdminHosts, useEgressIps, useUsers } from '../../queries';

interface Moved {
  sent_bytes: number;
  received_bytes: number;
}

/**
 * One breakdown of the month's bytes (per host, egress IP or user): each row named from `names`, linked to its
 * page when `link` says where, or said to be removed when it no longer exists.
 */
function TrafficSection<T extends Moved>(props: {
  title: string;
  label: string;
  testId: string;
  rows: T[];
  id: (row: T) => string;
  names: Map<string, string>;
  link?: (id: string) => string;
  removed: string;
}) {
  const { names, link } = props;
  const name = (id: string) => {
    const known = names.get(id);
    if (known === undefined) return props.removed;
    return link ? <Link to={link(id)}>{known}</Link> : known;
  };
  return (
    <Section title={props.title}>
      {props.rows.length === 0 ? (
        <p className="hint">Nothing counted yet.</p>
      ) : (
        <DataTable
          testId={props.testId}
          columns={[props.label, 'Sent', 'Received', 'Total']}
          rows={props.rows.map((row) => ({ ...row, id: props.id(row) }))}
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
  return (
    <>
      <h1>Traffic</h1>
      <p className="hint">
        From {when(from)} to {when(to)}, by the hour.
      </p>
      <TrafficSection
        title="Per host"
        label="Host"
        testId="traffic-hosts"
        rows={totals.data.hosts}
        id={(r) => r.host_id}
        names={new Map(hosts.data?.hosts.map((h) => [h.id, h.short_id]))}
        link={(id) => `/admin/hosts/${id}`}
        removed="removed host"
      />
      <TrafficSection
        title="Per egress IP"
        label="Egress IP"
        testId="traffic-egress-ips"
        rows={totals.data.egress_ips}
        id={(r) => r.egress_ip_id}
        names={new Map(egressIps.data?.egress_ips.map((e) => [e.id, `${e.label} (${e.ip_address})`]))}
        link={(id) => `/admin/egress-ips/${id}`}
        removed="removed egress IP"
      />
      <TrafficSection
        title="Per user"
        label="User"
        testId="traffic-users"
        rows={totals.data.users}
        id={(r) => r.user_id}
        names={new Map(users.data?.users.map((u) => [u.id, u.username]))}
        link={(id) => `/admin/users/${id}`}
        removed="removed user"
      />
    </>
  );
}
