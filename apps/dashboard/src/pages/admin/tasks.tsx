import type { TaskStatus } from '@ccp/api';
import { useQuery } from '@tanstack/react-query';
import { Link, useSearchParams } from 'react-router';
import { api } from '../../api';
import { DataTable } from '../../components/data-table';
import { Loading, Section, StatusBadge } from '../../components/ui';
import { when } from '../../format';
import { useAdminHosts } from '../../queries';

const STATUSES: TaskStatus[] = ['pending', 'running', 'succeeded', 'failed'];

export function Tasks() {
  const [params, setParams] = useSearchParams();
  const status = (params.get('status') ?? undefined) as TaskStatus | undefined;
  const hostId = params.get('host_id') ?? undefined;
  const query = { limit: 100, ...(status ? { status } : {}), ...(hostId ? { host_id: hostId } : {}) };
  const tasks = useQuery({ queryKey: ['tasks', query], queryFn: () => api.admin.tasks.list(query) });
  // Hosts are named by short ID everywhere; a deleted host's tasks have no host_id at all.
  const hosts = useAdminHosts();
  const shortIds = new Map(hosts.data?.hosts.map((h) => [h.id, h.short_id]));
  const setFilter = (key: string, value: string) => {
    const next = new URLSearchParams(params);
    if (value) next.set(key, value);
    else next.delete(key);
    setParams(next);
  };
  return (
    <>
      <h1>Tasks</h1>
      <Section
        title="Newest first"
        actions={
          <label className="inline">
            Status{' '}
            <select value={status ?? ''} onChange={(e) => setFilter('status', e.target.value)}>
              <option value="">any</option>
              {STATUSES.map((s) => (
                <option key={s}>{s}</option>
              ))}
            </select>
          </label>
        }
      >
        {hostId ? (
          <p className="hint">
            Host {shortIds.get(hostId) ?? '…'} ·{' '}
            <button type="button" className="link" onClick={() => setFilter('host_id', '')}>
              show all
            </button>
          </p>
        ) : null}
        {tasks.data ? (
          <DataTable
            columns={['Kind', 'Status', 'Progress', 'Host', 'By', 'Created', 'Outcome']}
            rows={tasks.data.tasks}
            row={(t) => (
              <>
                <td>{t.kind}</td>
                <td>
                  <StatusBadge status={t.status} />
                </td>
                <td>
                  <progress max={100} value={t.progress} /> {t.stage}
                </td>
                <td>
                  {t.host_id ? (
                    <Link to={`/admin/hosts/${t.host_id}`}>{shortIds.get(t.host_id) ?? '…'}</Link>
                  ) : (
                    '—'
                  )}
                </td>
                <td>{t.requested_by}</td>
                <td>{when(t.created_at)}</td>
                <td className={t.error ? 'error-inline' : ''}>
                  {t.error ? `${t.error.code}: ${t.error.message}` : t.message}
                </td>
              </>
            )}
          />
        ) : (
          <Loading error={tasks.error} />
        )}
      </Section>
    </>
  );
}
