import { type CreatedHost, CreateHostRequest } from '@ccp/api';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link, useSearchParams } from 'react-router';
import type { Static } from 'typebox';
import { api } from '../../api';
import { DataTable } from '../../components/data-table';
import { Field } from '../../components/field';
import { ActionButton, ErrorText, HostStatusBadge, Loading, OnceSecret, Section } from '../../components/ui';
import { when } from '../../format';
import { nodeChoice } from '../../node-choice';
import { useAdminHosts, useEgressIps, useNodes, useUsers } from '../../queries';
import { useFieldErrors } from '../../use-form';
import { apiFieldErrors } from '../../validation';

function CreateHostForm({ onCreated }: { onCreated: (host: CreatedHost) => void }) {
  const [params] = useSearchParams();
  const users = useUsers();
  const egress = useEgressIps();
  const nodes = useNodes();
  const client = useQueryClient();
  const [userId, setUserId] = useState(params.get('user') ?? '');
  const [egressIpId, setEgressIpId] = useState('');
  // Empty: the gateway places the host (the least loaded live node with room, preferring one with both images).
  const [node, setNode] = useState('');
  const { errors, setErrors, check } = useFieldErrors(CreateHostRequest);
  const create = useMutation({
    mutationFn: (body: Static<typeof CreateHostRequest>) => api.admin.hosts.create(body),
    onSuccess: (host) => {
      void client.invalidateQueries({ queryKey: ['hosts'] });
      onCreated(host);
    },
    onError: (error) => setErrors(apiFieldErrors(error)),
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const body: Static<typeof CreateHostRequest> = {
      user_id: userId,
      ...(egressIpId ? { egress_ip_id: egressIpId } : {}),
      ...(node ? { node } : {}),
    };
    if (check(body, userId ? {} : { user_id: 'Choose the user the host is for' })) create.mutate(body);
  };
  return (
    <form className="form-grid" onSubmit={submit} noValidate aria-label="Create host">
      <Field label="User" error={errors.user_id}>
        {(id) => (
          <select id={id} value={userId} onChange={(e) => setUserId(e.target.value)}>
            <option value="">Choose…</option>
            {users.data?.users
              .filter((u) => u.role === 'user')
              .map((u) => (
                <option key={u.id} value={u.id}>
                  {u.username}
                </option>
              ))}
          </select>
        )}
      </Field>
      <Field label="Egress IP (optional)" error={errors.egress_ip_id} hint="A host needs one to start">
        {(id) => (
          <select id={id} value={egressIpId} onChange={(e) => setEgressIpId(e.target.value)}>
            <option value="">None yet</option>
            {egress.data?.egress_ips.map((ip) => (
              <option key={ip.id} value={ip.id}>
                {ip.label} ({ip.ip_address})
              </option>
            ))}
          </select>
        )}
      </Field>
      <Field
        label="Node"
        error={errors.node}
        hint="Where the host and its home live; a host keeps its node. Automatic: the least loaded live node with room"
      >
        {(id) => (
          <select id={id} value={node} onChange={(e) => setNode(e.target.value)}>
            <option value="">Automatic</option>
            {nodes.data?.nodes.map((n) => {
              const choice = nodeChoice(n);
              return (
                <option key={n.name} value={n.name} disabled={choice.disabled}>
                  {choice.label}
                </option>
              );
            })}
          </select>
        )}
      </Field>
      <div className="form-actions">
        <ActionButton type="submit" kind="primary" pending={create.isPending}>
          Create host
        </ActionButton>
        <ErrorText error={create.error} />
      </div>
    </form>
  );
}

export function Hosts() {
  const hosts = useAdminHosts();
  const [created, setCreated] = useState<CreatedHost | null>(null);
  return (
    <>
      <h1>Hosts</h1>
      <Section title="New host">
        <CreateHostForm onCreated={setCreated} />
        {created ? (
          <>
            <p className="ok">
              Host <Link to={`/admin/hosts/${created.id}`}>{created.short_id}</Link> created for{' '}
              {created.username}.
            </p>
            <OnceSecret
              title="SSH details for the owner"
              lines={[
                { label: 'ssh user', value: created.ssh.ssh_user },
                { label: 'ssh password', value: created.ssh.ssh_pass },
                { label: 'ssh host', value: `${created.ssh.ssh_host}:${created.ssh.ssh_port}` },
              ]}
              onDone={() => setCreated(null)}
            />
          </>
        ) : null}
      </Section>
      <Section title="All hosts">
        {hosts.data ? (
          <DataTable
            columns={['Host', 'User', 'Status', 'Node', 'Egress', 'Started']}
            rows={hosts.data.hosts}
            row={(h) => (
              <>
                <td>
                  <Link to={`/admin/hosts/${h.id}`}>{h.short_id}</Link>
                </td>
                <td>{h.username}</td>
                <td>
                  <HostStatusBadge status={h.status} />
                </td>
                <td>{h.node ?? '—'}</td>
                <td>{h.bindings.find((b) => b.active)?.label ?? h.bindings[0]?.label ?? '—'}</td>
                <td>{when(h.started_at)}</td>
              </>
            )}
          />
        ) : (
          <Loading error={hosts.error} />
        )}
      </Section>
    </>
  );
}
