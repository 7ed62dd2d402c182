import { EventQuery } from '@ccp/api';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import type { FormEvent } from 'react';
import { Link, useSearchParams } from 'react-router';
import { api } from '../../api';
import { DataTable } from '../../components/data-table';
import { Field, InputField } from '../../components/field';
import { ActionButton, ErrorText, Loading, Section } from '../../components/ui';
import { fromLocalInput, toLocalInput, when } from '../../format';
import { useUsers } from '../../queries';
import { useForm } from '../../use-form';

const PAGE_SIZES = [10, 50, 100, 500] as const;
const DEFAULT_PAGE = 50;
const FILTERS = ['type', 'user_id', 'host_id', 'since', 'until'] as const;

/** The event log with every filter of the API; filters and page live in the URL, so a view can be linked. */
export function Events() {
  const [params, setParams] = useSearchParams();
  const users = useUsers();
  const offset = Number(params.get('offset') ?? 0) || 0;
  const pageSize = Number(params.get('limit')) || DEFAULT_PAGE;
  const query: EventQuery = { limit: pageSize, offset };
  for (const key of FILTERS) {
    const value = params.get(key);
    if (value) query[key] = value;
  }
  const events = useQuery({
    queryKey: ['events', query],
    queryFn: () => api.admin.events(query),
    placeholderData: keepPreviousData,
  });
  const {
    values: draft,
    setValues: setDraft,
    set,
    bind,
    errors,
    check,
  } = useForm(EventQuery, () => ({
    type: params.get('type') ?? '',
    user_id: params.get('user_id') ?? '',
    host_id: params.get('host_id') ?? '',
    since: toLocalInput(params.get('since')),
    until: toLocalInput(params.get('until')),
    limit: String(pageSize),
  }));
  const apply = (event: FormEvent) => {
    event.preventDefault();
    const filters: Record<string, string> = {};
    for (const key of ['type', 'user_id', 'host_id'] as const)
      if (draft[key].trim()) filters[key] = draft[key].trim();
    const since = fromLocalInput(draft.since);
    const until = fromLocalInput(draft.until);
    if (since) filters.since = since;
    if (until) filters.until = until;
    const valid = check(filters);
    // A new filter starts again at the newest page.
    if (draft.limit !== String(DEFAULT_PAGE)) filters.limit = draft.limit;
    if (valid) setParams(new URLSearchParams(filters));
  };
  const page = (nextOffset: number) => {
    const next = new URLSearchParams(params);
    next.set('offset', String(nextOffset));
    setParams(next);
  };
  const data = events.data;
  return (
    <>
      <h1>Events</h1>
      <Section title="Filters">
        <form className="form-grid" onSubmit={apply} noValidate aria-label="Event filters">
          <InputField label="Type" {...bind('type')} hint="Exact name, e.g. host.started" />
          <Field label="User" error={errors.user_id}>
            {(id) => (
              <select id={id} value={draft.user_id} onChange={(e) => set('user_id', e.target.value)}>
                <option value="">any</option>
                {users.data?.users.map((u) => (
                  <option key={u.id} value={u.id}>
                    {u.username}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <InputField label="Host id" {...bind('host_id')} />
          <InputField label="Since" {...bind('since')} type="datetime-local" />
          <InputField label="Until" {...bind('until')} type="datetime-local" />
          <Field label="Per page">
            {(id) => (
              <select id={id} value={draft.limit} onChange={(e) => set('limit', e.target.value)}>
                {PAGE_SIZES.map((size) => (
                  <option key={size}>{size}</option>
                ))}
              </select>
            )}
          </Field>
          <div className="form-actions">
            <ActionButton type="submit" kind="primary">
              Apply filters
            </ActionButton>
            <Link
              to="/admin/events"
              onClick={() =>
                setDraft({
                  type: '',
                  user_id: '',
                  host_id: '',
                  since: '',
                  until: '',
                  limit: String(DEFAULT_PAGE),
                })
              }
            >
              Clear
            </Link>
          </div>
        </form>
      </Section>
      <Section
        title={data ? `${data.total} event${data.total === 1 ? '' : 's'}` : 'Events'}
        actions={
          data ? (
            <div className="row">
              <ActionButton disabled={offset === 0} onClick={() => page(Math.max(0, offset - pageSize))}>
                Newer
              </ActionButton>
              {/* The range of the rows shown (the previous page's while the next one loads). */}
              <span className="hint" aria-busy={events.isPlaceholderData}>
                {data.total === 0 ? 0 : data.offset + 1}–{Math.min(data.offset + data.limit, data.total)}
                {events.isPlaceholderData ? ' (loading…)' : ''}
              </span>
              <ActionButton
                disabled={offset + pageSize >= data.total}
                onClick={() => page(offset + pageSize)}
              >
                Older
              </ActionButton>
            </div>
          ) : null
        }
      >
        <ErrorText error={events.error && data ? events.error : null} />
        {data && data.events.length === 0 ? <p className="hint">No events match these filters.</p> : null}
        {data && data.events.length > 0 ? (
          <DataTable
            testId="events-table"
            columns={['When', 'Level', 'Type', 'Message', 'Actor']}
            rows={data.events}
            row={(e) => (
              <>
                <td title={e.created_at}>{when(e.created_at)}</td>
                <td>
                  <span className={`level level-${e.level}`}>{e.level}</span>
                </td>
                <td>
                  <code>{e.type}</code>
                </td>
                <td>
                  {e.message} {e.host_id ? <Link to={`/admin/hosts/${e.host_id}`}>host</Link> : null}
                </td>
                <td>{e.actor.username ?? e.actor.kind}</td>
              </>
            )}
          />
        ) : null}
        {data ? null : <Loading error={events.error} />}
      </Section>
    </>
  );
}
