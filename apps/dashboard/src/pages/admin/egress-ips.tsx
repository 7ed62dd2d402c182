import { ApiError, type CreateEgressIpRequest, type EgressIp, type EgressTestResult } from '@ccp/api';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { api } from '../../api';
import { DataTable } from '../../components/data-table';
import {
  ActionButton,
  ConfirmButton,
  ErrorText,
  HostStatusBadge,
  Loading,
  Section,
  StatusBadge,
} from '../../components/ui';
import { when } from '../../format';
import { useAdminHosts, useEgressIps } from '../../queries';
import { apiFieldErrors } from '../../validation';
import { EgressForm } from './egress-form';

/** The three checks of an egress test, each with its outcome, figures and error. */
export function TestResult({ result }: { result: EgressTestResult }) {
  const { connectivity, exit_ip, dns_leak } = result.checks;
  const rows = [
    {
      name: 'Connectivity',
      ok: connectivity.ok,
      detail: connectivity.latency_ms === null ? '' : `${connectivity.latency_ms} ms`,
      error: connectivity.error,
    },
    {
      name: 'Exit IP',
      ok: exit_ip.ok,
      detail: `expected ${exit_ip.expected}, seen ${exit_ip.observed ?? '—'}`,
      error: exit_ip.error,
    },
    {
      name: 'DNS leak',
      ok: dns_leak.ok,
      detail: dns_leak.resolver_ip ? `resolver ${dns_leak.resolver_ip}` : '',
      error: dns_leak.error,
    },
  ];
  return (
    <div className="test-result" data-testid="egress-test-result" data-ok={result.ok}>
      <p>
        <StatusBadge status={result.ok ? 'passed' : 'failed'} /> in {result.duration_ms} ms ·{' '}
        {when(result.tested_at)}
      </p>
      <ul className="plain-list">
        {rows.map((row) => (
          <li key={row.name}>
            <span className={row.ok ? 'ok' : 'bad'}>{row.ok ? '✓' : '✗'}</span> <strong>{row.name}</strong>{' '}
            {row.detail} {row.error ? <span className="error-inline">{row.error}</span> : null}
          </li>
        ))}
      </ul>
    </div>
  );
}

function TestButton({ ip }: { ip: EgressIp }) {
  const client = useQueryClient();
  const test = useMutation({
    mutationFn: () => api.admin.egressIps.test(ip.id),
    onSettled: () => void client.invalidateQueries({ queryKey: ['egress-ips'] }),
  });
  return (
    <>
      <ActionButton pending={test.isPending} onClick={() => test.mutate()}>
        {test.isPending ? 'Testing (up to 30 s)…' : 'Test'}
      </ActionButton>
      <ErrorText error={test.error} />
    </>
  );
}

export function EgressIps() {
  const list = useEgressIps();
  const client = useQueryClient();
  const navigate = useNavigate();
  const create = useMutation({
    mutationFn: (body: CreateEgressIpRequest) => api.admin.egressIps.create(body),
    onSuccess: (ip) => {
      void client.invalidateQueries({ queryKey: ['egress-ips'] });
      navigate(`/admin/egress-ips/${ip.id}`);
    },
  });
  const [formKey, setFormKey] = useState(0);
  return (
    <>
      <h1>Egress IPs</h1>
      <Section title="All egress IPs">
        {list.data ? (
          <DataTable
            columns={['Label', 'Exit IP', 'Protocol', 'Bound hosts', 'Last test', '']}
            rows={list.data.egress_ips}
            row={(ip) => (
              <>
                <td>
                  <Link to={`/admin/egress-ips/${ip.id}`}>{ip.label}</Link>
                </td>
                <td>{ip.ip_address}</td>
                <td>{ip.proxy_config.type}</td>
                <td>{ip.bound_host_ids.length}</td>
                <td>
                  {ip.last_test ? (
                    <StatusBadge status={ip.last_test.ok ? 'passed' : 'failed'} />
                  ) : (
                    <span className="hint">not tested</span>
                  )}
                </td>
                <td>
                  <TestButton ip={ip} />
                </td>
              </>
            )}
          />
        ) : (
          <Loading error={list.error} />
        )}
      </Section>
      <Section title="New egress IP">
        <EgressForm
          key={formKey}
          pending={create.isPending}
          error={create.error}
          serverErrors={apiFieldErrors(create.error)}
          submitLabel="Create egress IP"
          onSubmit={(body) => create.mutate(body, { onSuccess: () => setFormKey((k) => k + 1) })}
        />
      </Section>
    </>
  );
}

export function EgressIpDetail() {
  const { ipId = '' } = useParams();
  const client = useQueryClient();
  const navigate = useNavigate();
  const list = useEgressIps();
  const hosts = useAdminHosts();
  const ip = useQuery({ queryKey: ['egress-ips', ipId], queryFn: () => api.admin.egressIps.get(ipId) });
  const [saved, setSaved] = useState(0);
  const update = useMutation({
    mutationFn: (body: CreateEgressIpRequest) => api.admin.egressIps.update(ipId, body),
    onSuccess: (saved) => {
      // The form is made again from the saved settings (not the copy read before the change).
      client.setQueryData(['egress-ips', ipId], saved);
      setSaved((n) => n + 1);
      void client.invalidateQueries({ queryKey: ['egress-ips'] });
    },
  });
  const remove = useMutation({
    mutationFn: () => api.admin.egressIps.remove(ipId),
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: ['egress-ips'] });
      navigate('/admin/egress-ips');
    },
  });
  if (!ip.data) return <Loading error={ip.error ?? list.error} />;
  const e = ip.data;
  const bound = hosts.data?.hosts.filter((h) => e.bound_host_ids.includes(h.id)) ?? [];
  const refusedHosts = remove.error instanceof ApiError ? (remove.error.body.host_ids ?? []) : [];
  return (
    <>
      <p>
        <Link to="/admin/egress-ips">← Egress IPs</Link>
      </p>
      <h1>
        {e.label} <span className="hint">{e.ip_address}</span>
      </h1>
      <div className="grid-2">
        <Section title="Test" actions={<TestButton ip={e} />}>
          {e.last_test ? (
            <TestResult result={e.last_test} />
          ) : (
            <p className="hint">Not tested since the last change.</p>
          )}
        </Section>
        <Section title="Bound hosts">
          {e.bound_host_ids.length === 0 ? (
            <p className="hint">No host uses this egress IP.</p>
          ) : (
            <ul className="plain-list">
              {bound.map((h) => (
                <li key={h.id}>
                  <Link to={`/admin/hosts/${h.id}`}>{h.short_id}</Link> ({h.username}){' '}
                  <HostStatusBadge status={h.status} />
                </li>
              ))}
            </ul>
          )}
        </Section>
      </div>
      <Section title="Settings">
        <EgressForm
          key={`${e.id}-${saved}`}
          existing={e}
          pending={update.isPending}
          error={update.error}
          serverErrors={apiFieldErrors(update.error)}
          submitLabel="Save changes"
          onSubmit={(body) => update.mutate(body)}
        />
        {update.isSuccess ? (
          <p className="ok">Saved. Running hosts switch to the new settings without a restart.</p>
        ) : null}
      </Section>
      <Section title="Delete">
        {e.bound_host_ids.length > 0 ? (
          <p className="hint">
            Bound to {e.bound_host_ids.length} host(s): unbind them first, or the gateway refuses.
          </p>
        ) : null}
        <ConfirmButton
          label="Delete egress IP"
          confirmLabel={`Delete ${e.label}`}
          pending={remove.isPending}
          onConfirm={() => remove.mutate()}
          question={
            <p>
              Delete the egress IP <strong>{e.label}</strong> ({e.ip_address}) and its stored secrets?
            </p>
          }
        />
        <ErrorText error={remove.error} />
        {refusedHosts.length > 0 ? (
          <p>
            Bound to:{' '}
            {refusedHosts.map((id) => (
              <Link key={id} to={`/admin/hosts/${id}`} className="pad-right">
                {hosts.data?.hosts.find((h) => h.id === id)?.short_id ?? id}
              </Link>
            ))}
          </p>
        ) : null}
      </Section>
    </>
  );
}
