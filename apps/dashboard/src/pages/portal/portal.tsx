import { ChangePasswordRequest, type Host } from '@ccp/api';
import { useMutation, useQuery } from '@tanstack/react-query';
import type { FormEvent } from 'react';
import { Link, useNavigate, useParams, useSearchParams } from 'react-router';
import type { Static } from 'typebox';
import { api } from '../../api';
import { InputField } from '../../components/field';
import { HostAccess } from '../../components/host-access';
import { HostDesktop, OpenDesktopButton } from '../../components/host-desktop';
import { HostEgressNotice } from '../../components/host-egress';
import { HostEgressDecisions } from '../../components/host-egress-decisions';
import { HostLifecycle } from '../../components/host-lifecycle';
import { HostResources } from '../../components/host-resources';
import { HostShares, SharedWithMe } from '../../components/host-shares';
import { HostTask } from '../../components/host-task';
import { HostTerminal } from '../../components/host-terminal';
import { HostTrafficChart } from '../../components/host-traffic-chart';
import { KeysPanel } from '../../components/keys-panel';
import { NodeUnavailableNotice } from '../../components/node-unavailable';
import { OwnQuotas } from '../../components/resources-panel';
import { ActionButton, ErrorText, HostStatusBadge, Loading, Section } from '../../components/ui';
import { bytes, when } from '../../format';
import { canStart, failedHostNextStep, NO_EGRESS_HINT, nodeLost } from '../../host-state';
import { useForm } from '../../use-form';
import { apiFieldErrors } from '../../validation';

export function PortalHosts() {
  const hosts = useQuery({ queryKey: ['hosts', 'own'], queryFn: api.user.hosts.list });
  return (
    <>
      <h1>My hosts</h1>
      {!hosts.data ? (
        <Loading error={hosts.error} />
      ) : hosts.data.hosts.length === 0 ? (
        <p className="hint">You have no host yet. Ask your administrator to create one.</p>
      ) : (
        hosts.data.hosts.map((h) => (
          <Section
            key={h.id}
            title={`Host ${h.short_id}`}
            actions={
              <span className="row">
                <HostStatusBadge status={h.status} /> <Link to={`/portal/hosts/${h.id}`}>Details</Link>
              </span>
            }
          >
            {h.status === 'failed' ? <HostFailure host={h} onList /> : null}
            {nodeLost(h) ? <NodeUnavailableNotice host={h} scope="user" /> : null}
            <HostResources host={h} />
            <HostAccess host={h} scope="user" />
            <OpenDesktopButton host={h} scope="user" />
          </Section>
        ))
      )}
      <SharedWithMe />
    </>
  );
}

export function PortalHost() {
  const { hostId = '' } = useParams();
  const [params, setParams] = useSearchParams();
  const host = useQuery({ queryKey: ['host', hostId], queryFn: () => api.user.hosts.get(hostId) });
  const taskId = params.get('task');
  const action = useMutation({
    mutationFn: (kind: 'start' | 'stop' | 'rebuild') => api.user.hosts[kind](hostId),
    // The task id goes into the URL so the progress survives a reload or a new sign-in.
    onSuccess: (accepted) => setParams({ task: accepted.task_id }, { replace: true }),
  });
  if (!host.data) return <Loading error={host.error} />;
  const h = host.data;
  const busy = ['starting', 'stopping', 'rebuilding'].includes(h.status) || nodeLost(h);
  const pending = (kind: string) => action.isPending && action.variables === kind;
  return (
    <>
      <p>
        <Link to="/portal">← My hosts</Link>
      </p>
      <h1>
        Host {h.short_id} <HostStatusBadge status={h.status} />
      </h1>
      <p className="hint">
        Started {when(h.started_at)} · egress {h.bindings.find((b) => b.active)?.ip_address ?? '—'}
      </p>
      <HostResources host={h} />
      {h.status === 'failed' ? <HostFailure host={h} /> : null}
      {nodeLost(h) ? <NodeUnavailableNotice host={h} scope="user" /> : null}
      <HostLifecycle host={h} scope="user" />
      <HostEgressNotice host={h} />
      <HostTraffic hostId={h.id} />
      <HostEgressDecisions hostId={h.id} scope="user" />
      <Section title="Access">
        <HostAccess host={h} scope="user" />
        <HostDesktop host={h} scope="user" />
        <HostTerminal host={h} scope="user" />
        <HostShares host={h} scope="user" />
      </Section>
      <Section title="Start and stop">
        <div className="row wrap">
          <ActionButton
            kind="primary"
            pending={pending('start')}
            disabled={busy || h.status === 'running' || !canStart(h)}
            onClick={() => action.mutate('start')}
          >
            Start
          </ActionButton>
          <ActionButton
            pending={pending('stop')}
            disabled={busy || h.status === 'stopped' || h.status === 'created'}
            onClick={() => action.mutate('stop')}
          >
            Stop
          </ActionButton>
          <ActionButton pending={pending('rebuild')} disabled={busy} onClick={() => action.mutate('rebuild')}>
            Rebuild
          </ActionButton>
        </div>
        {canStart(h) ? null : <p className="hint">{NO_EGRESS_HINT}</p>}
        <p className="hint">
          Stopping keeps your files. Rebuild recreates the workspace from the current image; your home
          directory is kept.
        </p>
        <ErrorText error={action.error} />
        {taskId ? <HostTask hostId={h.id} taskId={taskId} scope="user" /> : null}
      </Section>
      <HostTrafficChart hostId={h.id} scope="user" />
    </>
  );
}

/** What the host sent and received through its egress IP this month (counted in its egress gateway). */
function HostTraffic({ hostId }: { hostId: string }) {
  const traffic = useQuery({
    queryKey: ['egress-traffic', hostId],
    queryFn: () => api.user.egressTraffic({ host_id: hostId }),
  });
  const row = traffic.data?.hosts.find((r) => r.host_id === hostId);
  if (!traffic.data) return null;
  return (
    <p className="hint" data-testid="host-traffic">
      This month through the egress IP: sent {bytes(row?.sent_bytes ?? 0)}, received{' '}
      {bytes(row?.received_bytes ?? 0)}
    </p>
  );
}

/** Why a host failed and what its owner can do next; on the list, the next step is on the host's page. */
function HostFailure({ host, onList = false }: { host: Host; onList?: boolean }) {
  const next = failedHostNextStep(host);
  return (
    <div className="failure" role="alert" data-testid="host-failure">
      <p>
        <strong>The host failed:</strong> {host.last_error ?? 'no reason was recorded'}
      </p>
      <p>
        {next.text}
        {next.canRetry && onList ? (
          <>
            {' '}
            <Link to={`/portal/hosts/${host.id}`}>Open the host</Link>
          </>
        ) : null}
      </p>
    </div>
  );
}

export function PortalKeys() {
  return (
    <>
      <h1>SSH keys</h1>
      <KeysPanel queryKey={['keys', 'own']} keysApi={api.user.keys} />
    </>
  );
}

export function PortalAccount() {
  const navigate = useNavigate();
  const { values, bind, setErrors, check } = useForm(ChangePasswordRequest, {
    old_password: '',
    new_password: '',
  });
  const change = useMutation({
    mutationFn: (body: Static<typeof ChangePasswordRequest>) => api.user.changePassword(body),
    onSuccess: () => {
      // Every token of the account ended with the change: sign in again (the sign-in page ends the session).
      navigate('/sign-in?changed=1');
    },
    onError: (error) => setErrors(apiFieldErrors(error)),
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (check(values)) change.mutate(values);
  };
  return (
    <>
      <h1>Account</h1>
      <OwnQuotas />
      <Section title="Password">
        <form className="narrow" onSubmit={submit} noValidate aria-label="Change password">
          <InputField
            label="Current password"
            {...bind('old_password')}
            type="password"
            autoComplete="current-password"
          />
          <InputField
            label="New password"
            {...bind('new_password')}
            type="password"
            autoComplete="new-password"
          />
          <ActionButton type="submit" kind="primary" pending={change.isPending}>
            Change password
          </ActionButton>
          <p className="hint">You will sign in again with the new password.</p>
          <ErrorText error={change.error} />
        </form>
      </Section>
    </>
  );
}
