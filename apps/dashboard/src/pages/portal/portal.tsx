import { ChangePasswordRequest } from '@ccp/api';
import { useMutation, useQuery } from '@tanstack/react-query';
import type { FormEvent } from 'react';
import { Link, useNavigate, useParams, useSearchParams } from 'react-router';
import type { Static } from 'typebox';
import { api } from '../../api';
import { InputField } from '../../components/field';
import { HostAccess } from '../../components/host-access';
import { HostDesktop, OpenDesktopButton } from '../../components/host-desktop';
import { HostTask } from '../../components/host-task';
import { KeysPanel } from '../../components/keys-panel';
import { ActionButton, ErrorText, Loading, Section, StatusBadge } from '../../components/ui';
import { when } from '../../format';
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
                <StatusBadge status={h.status} /> <Link to={`/portal/hosts/${h.id}`}>Details</Link>
              </span>
            }
          >
            <HostAccess host={h} />
            <OpenDesktopButton host={h} />
          </Section>
        ))
      )}
    </>
  );
}

export function PortalHost() {
  const { hostId = '' } = useParams();
  const [params, setParams] = useSearchParams();
  const host = useQuery({ queryKey: ['host', hostId], queryFn: () => api.user.hosts.get(hostId) });
  const taskId = params.get('task');
  const rebuild = useMutation({
    mutationFn: () => api.user.hosts.rebuild(hostId),
    // The task id goes into the URL so the progress survives a reload or a new sign-in.
    onSuccess: (accepted) => setParams({ task: accepted.task_id }, { replace: true }),
  });
  if (!host.data) return <Loading error={host.error} />;
  const h = host.data;
  return (
    <>
      <p>
        <Link to="/portal">← My hosts</Link>
      </p>
      <h1>
        Host {h.short_id} <StatusBadge status={h.status} />
      </h1>
      <p className="hint">
        Started {when(h.started_at)} · egress {h.bindings.find((b) => b.active)?.ip_address ?? '—'}
      </p>
      {h.last_error ? <p className="error">{h.last_error}</p> : null}
      <Section title="Access">
        <HostAccess host={h} />
        <HostDesktop host={h} scope="user" />
      </Section>
      <Section title="Rebuild">
        <p className="hint">Recreates the workspace from the current image. Your home directory is kept.</p>
        <ActionButton
          pending={rebuild.isPending}
          disabled={['starting', 'stopping', 'rebuilding'].includes(h.status)}
          onClick={() => rebuild.mutate()}
        >
          Rebuild
        </ActionButton>
        <ErrorText error={rebuild.error} />
        {taskId ? <HostTask hostId={h.id} taskId={taskId} scope="user" /> : null}
      </Section>
    </>
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
      <h1>Change password</h1>
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
