import type { Host, QuotaName, UserResources } from '@ccp/api';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'react-router';
import { api } from '../api';
import { DataTable } from './data-table';
import { InputField } from './field';
import { ActionButton, ErrorText, Loading, Section } from './ui';

const QUOTAS: { key: QuotaName; label: string; unit: string }[] = [
  { key: 'hosts', label: 'Hosts', unit: '' },
  { key: 'running_hosts', label: 'Running hosts', unit: '' },
  { key: 'cpus', label: 'CPUs (running)', unit: '' },
  { key: 'memory_mb', label: 'Memory (running)', unit: ' MiB' },
  { key: 'home_mb', label: 'Home volumes', unit: ' MiB' },
];

const DEFAULTS = [
  { key: 'cpus', label: 'CPUs' },
  { key: 'memory_mb', label: 'Memory, MiB' },
  { key: 'pids', label: 'Processes' },
  { key: 'home_mb', label: 'Home, MiB' },
] as const;

/** "used of limit" for one quota, or "used (unlimited)". */
export function quotaText(resources: UserResources, key: QuotaName): string {
  const unit = QUOTAS.find((q) => q.key === key)!.unit;
  const limit = resources.quotas[key];
  return limit === null
    ? `${resources.usage[key]}${unit} (unlimited)`
    : `${resources.usage[key]} of ${limit}${unit}`;
}

/** What a user's hosts take of each quota. */
export function QuotaUseList({ resources }: { resources: UserResources }) {
  return (
    <DataTable
      testId="quota-use"
      columns={['Quota', 'In use']}
      rows={QUOTAS.map((q) => ({ id: q.key, ...q }))}
      row={(q) => (
        <>
          <td>{q.label}</td>
          <td data-testid={`quota-${q.key}`}>{quotaText(resources, q.key)}</td>
        </>
      )}
    />
  );
}

/** A number field's text as the API takes it: blank is null (a default, or unlimited). */
const numberOrNull = (text: string) => (text.trim() === '' ? null : Number(text));
const textOf = (value: number | null) => (value === null ? '' : String(value));

/** An admin's view of a user's quotas and defaults, with the form that changes them. */
export function UserResourcesPanel({ userId }: { userId: string }) {
  const client = useQueryClient();
  const query = useQuery({
    queryKey: ['users', userId, 'resources'],
    queryFn: () => api.admin.users.resources(userId),
  });
  const [draft, setDraft] = useState<Record<string, string> | null>(null);
  const save = useMutation({
    mutationFn: (values: Record<string, string>) =>
      api.admin.users.setResources(userId, {
        quotas: Object.fromEntries(QUOTAS.map((q) => [q.key, numberOrNull(values[`quota_${q.key}`] ?? '')])),
        defaults: Object.fromEntries(
          DEFAULTS.map((d) => [d.key, numberOrNull(values[`default_${d.key}`] ?? '')]),
        ),
      }),
    onSuccess: () => {
      setDraft(null);
      void client.invalidateQueries({ queryKey: ['users'] });
      void client.invalidateQueries({ queryKey: ['quotas'] });
    },
  });
  if (!query.data) return <Loading error={query.error} />;
  const r = query.data;
  const values = draft ?? {
    ...Object.fromEntries(QUOTAS.map((q) => [`quota_${q.key}`, textOf(r.quotas[q.key])])),
    ...Object.fromEntries(DEFAULTS.map((d) => [`default_${d.key}`, textOf(r.defaults[d.key])])),
  };
  const set = (key: string) => (value: string) => setDraft({ ...values, [key]: value });
  return (
    <Section title="Resources and quotas">
      <QuotaUseList resources={r} />
      <form
        onSubmit={(event) => {
          event.preventDefault();
          save.mutate(values);
        }}
      >
        <p className="muted">Quotas (blank: unlimited)</p>
        <div className="row wrap">
          {QUOTAS.map((q) => (
            <InputField
              key={q.key}
              label={q.label}
              value={values[`quota_${q.key}`] ?? ''}
              onChange={set(`quota_${q.key}`)}
            />
          ))}
        </div>
        <p className="muted">Defaults of hosts without their own (blank: the gateway's)</p>
        <div className="row wrap">
          {DEFAULTS.map((d) => (
            <InputField
              key={d.key}
              label={d.label}
              value={values[`default_${d.key}`] ?? ''}
              onChange={set(`default_${d.key}`)}
            />
          ))}
        </div>
        <ActionButton type="submit" kind="primary" pending={save.isPending}>
          Save resources
        </ActionButton>
        <ErrorText error={save.error} />
      </form>
    </Section>
  );
}

/** An admin's form that resizes a host (blank: back to the default). */
export function HostResizeForm({ host }: { host: Host }) {
  const client = useQueryClient();
  const [draft, setDraft] = useState<Record<string, string> | null>(null);
  const save = useMutation({
    mutationFn: (values: Record<string, string>) =>
      // Only what was changed: a value left as shown keeps following its default.
      api.admin.hosts.resize(
        host.id,
        Object.fromEntries(
          DEFAULTS.filter((d) => values[d.key] !== String(host.resources[d.key])).map((d) => [
            d.key,
            numberOrNull(values[d.key] ?? ''),
          ]),
        ),
      ),
    onSuccess: () => {
      setDraft(null);
      void client.invalidateQueries({ queryKey: ['host', host.id] });
      void client.invalidateQueries({ queryKey: ['hosts'] });
    },
  });
  const values = draft ?? Object.fromEntries(DEFAULTS.map((d) => [d.key, String(host.resources[d.key])]));
  return (
    <Section title="Resources">
      <form
        onSubmit={(event) => {
          event.preventDefault();
          save.mutate(values);
        }}
      >
        <p className="muted">
          A running host gets memory, CPUs and processes at once; a home grows and never shrinks. Blank: back
          to the default.
        </p>
        <div className="row wrap">
          {DEFAULTS.map((d) => (
            <InputField
              key={d.key}
              label={d.label}
              value={values[d.key] ?? ''}
              onChange={(value) => setDraft({ ...values, [d.key]: value })}
            />
          ))}
        </div>
        <ActionButton type="submit" kind="primary" pending={save.isPending}>
          Resize
        </ActionButton>
        <ErrorText error={save.error} />
      </form>
    </Section>
  );
}

/** The admins' page: every user's use of each quota. */
export function Quotas() {
  const query = useQuery({ queryKey: ['quotas'], queryFn: api.admin.quotas });
  return (
    <>
      <h1>Quotas</h1>
      <Section title="Use per user">
        {query.data ? (
          <DataTable
            testId="quotas"
            columns={['User', ...QUOTAS.map((q) => q.label)]}
            rows={query.data.users.map((user) => ({ id: user.user_id, user }))}
            row={({ user }) => (
              <>
                <td>
                  <Link to={`/admin/users/${user.user_id}`}>{user.username}</Link>
                </td>
                {QUOTAS.map((q) => (
                  <td key={q.key}>{quotaText(user, q.key)}</td>
                ))}
              </>
            )}
          />
        ) : (
          <Loading error={query.error} />
        )}
      </Section>
    </>
  );
}

/** A user's own quotas and what the hosts take of them (portal). */
export function OwnQuotas() {
  const query = useQuery({ queryKey: ['own-resources'], queryFn: api.user.resources });
  return (
    <Section title="Quotas">
      {query.data ? <QuotaUseList resources={query.data} /> : <Loading error={query.error} />}
    </Section>
  );
}
