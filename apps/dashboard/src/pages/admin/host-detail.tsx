import type { TaskAccepted } from '@ccp/api';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { api } from '../../api';
import { HostEgressPolicyPanel } from '../../components/egress-policy-panel';
import { Field } from '../../components/field';
import { HostAccess } from '../../components/host-access';
import { HostDesktop } from '../../components/host-desktop';
import { HostEgressBudgetPanel, HostEgressNotice } from '../../components/host-egress';
import { HostEgressDecisions } from '../../components/host-egress-decisions';
import { HostLifecycle } from '../../components/host-lifecycle';
import { HostResources } from '../../components/host-resources';
import { HostTask } from '../../components/host-task';
import { HostTerminal } from '../../components/host-terminal';
import { HostTrafficChart } from '../../components/host-traffic-chart';
import { HostPolicyPanel } from '../../components/lifecycle-policy-panel';
import { NodeUnavailableNotice } from '../../components/node-unavailable';
import { HostResizeForm } from '../../components/resources-panel';
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
import { nodeLost } from '../../host-state';
import { useAdminHost, useEgressIps } from '../../queries';

type HostAction = 'start' | 'stop' | 'rebuild';

export function HostDetail() {
  const { hostId = '' } = useParams();
  const client = useQueryClient();
  const navigate = useNavigate();
  const host = useAdminHost(hostId);
  const egress = useEgressIps();
  const [taskId, setTaskId] = useState<string | null>(null);
  const [bindTo, setBindTo] = useState('');
  const action = useMutation({
    mutationFn: (kind: HostAction): Promise<TaskAccepted> => api.admin.hosts[kind](hostId),
    onSuccess: (accepted) => setTaskId(accepted.task_id),
  });
  const refresh = () => {
    void client.invalidateQueries({ queryKey: ['host', hostId] });
    void client.invalidateQueries({ queryKey: ['egress-ips'] });
  };
  const bind = useMutation({
    mutationFn: (egressIpId: string) => api.admin.bindings.create(hostId, egressIpId),
    onSuccess: () => {
      setBindTo('');
      refresh();
    },
  });
  const unbind = useMutation({ mutationFn: api.admin.bindings.remove, onSuccess: refresh });
  const remove = useMutation({
    mutationFn: () => api.admin.hosts.remove(hostId),
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: ['hosts'] });
      navigate('/admin/hosts');
    },
  });

  if (!host.data) return <Loading error={host.error} />;
  const h = host.data;
  const bound = new Set(h.bindings.map((b) => b.egress_ip_id));
  const available = egress.data?.egress_ips.filter((ip) => !bound.has(ip.id)) ?? [];
  // A host whose node is silent takes no task until the node returns (the API refuses with node_unavailable).
  const busy = ['starting', 'stopping', 'rebuilding'].includes(h.status) || nodeLost(h);
  return (
    <>
      <p>
        <Link to="/admin/hosts">← Hosts</Link>
      </p>
      <h1>
        Host {h.short_id} <HostStatusBadge status={h.status} />
      </h1>
      <p className="hint">
        for <Link to={`/admin/users/${h.user_id}`}>{h.username}</Link> · node{' '}
        <span data-testid="host-node">{h.node ?? '—'}</span> · image {h.image ?? '—'} · started{' '}
        {when(h.started_at)}
      </p>
      {nodeLost(h) ? <NodeUnavailableNotice host={h} scope="admin" /> : null}
      <HostResources host={h} />
      <HostEgressNotice host={h} />
      {h.last_error ? (
        <p className="error" role="alert">
          {h.last_error}
        </p>
      ) : null}
      <Section title="Lifecycle">
        <div className="row wrap">
          <ActionButton
            kind="primary"
            pending={action.isPending && action.variables === 'start'}
            disabled={busy || h.status === 'running'}
            onClick={() => action.mutate('start')}
          >
            Start
          </ActionButton>
          <ActionButton
            pending={action.isPending && action.variables === 'stop'}
            disabled={busy || h.status === 'stopped' || h.status === 'created'}
            onClick={() => action.mutate('stop')}
          >
            Stop
          </ActionButton>
          <ActionButton
            pending={action.isPending && action.variables === 'rebuild'}
            disabled={busy}
            onClick={() => action.mutate('rebuild')}
          >
            Rebuild
          </ActionButton>
        </div>
        <ErrorText error={action.error} />
        <HostTask hostId={h.id} taskId={taskId} scope="admin" />
        <HostLifecycle host={h} scope="admin" />
      </Section>
      <div className="grid-2">
        <Section title="Access">
          <HostAccess host={h} scope="admin" />
          <HostDesktop host={h} scope="admin" />
          <HostTerminal host={h} scope="admin" />
        </Section>
        <Section title="Egress bindings">
          {h.bindings.length === 0 ? (
            <p className="hint">No egress IP bound: the host cannot start.</p>
          ) : null}
          <ul className="plain-list">
            {h.bindings.map((b) => (
              <li key={b.id} className="row between wrap">
                <span>
                  <Link to={`/admin/egress-ips/${b.egress_ip_id}`}>{b.label}</Link> {b.ip_address}{' '}
                  <StatusBadge status={b.active ? 'active' : 'standby'} />
                </span>
                <ActionButton
                  pending={unbind.isPending && unbind.variables === b.id}
                  onClick={() => unbind.mutate(b.id)}
                >
                  Unbind
                </ActionButton>
              </li>
            ))}
          </ul>
          <ErrorText error={unbind.error} />
          <div className="spaced" />
          <div className="row wrap end">
            <Field label="Bind an egress IP">
              {(id) => (
                <select id={id} value={bindTo} onChange={(e) => setBindTo(e.target.value)}>
                  <option value="">Choose…</option>
                  {available.map((ip) => (
                    <option key={ip.id} value={ip.id}>
                      {ip.label} ({ip.ip_address})
                    </option>
                  ))}
                </select>
              )}
            </Field>
            <ActionButton disabled={!bindTo} pending={bind.isPending} onClick={() => bind.mutate(bindTo)}>
              Bind
            </ActionButton>
          </div>
          <ErrorText error={bind.error} />
        </Section>
      </div>
      <HostResizeForm host={h} />
      <HostPolicyPanel hostId={h.id} />
      <HostTrafficChart hostId={h.id} scope="admin" />
      <HostEgressBudgetPanel hostId={h.id} />
      <HostEgressDecisions hostId={h.id} scope="admin" />
      <HostEgressPolicyPanel hostId={h.id} />
      <Section title="Delete">
        <ConfirmButton
          label="Delete host"
          confirmLabel={`Delete host ${h.short_id}`}
          pending={remove.isPending}
          onConfirm={() => remove.mutate()}
          question={
            <p>
              Delete host <strong>{h.short_id}</strong> of {h.username} with its containers and its home
              volume (all files in the workspace)? This cannot be undone.
            </p>
          }
        />
        <ErrorText error={remove.error} />
      </Section>
      <p>
        <Link to={`/admin/events?host_id=${h.id}`}>Events of this host</Link> ·{' '}
        <Link to={`/admin/tasks?host_id=${h.id}`}>Tasks of this host</Link>
      </p>
    </>
  );
}
