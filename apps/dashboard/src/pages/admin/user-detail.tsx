import { ExpiryRequest } from '@ccp/api';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { api } from '../../api';
import { InputField } from '../../components/field';
import { KeysPanel } from '../../components/keys-panel';
import { UserHostPolicyPanel } from '../../components/lifecycle-policy-panel';
import { UserResourcesPanel } from '../../components/resources-panel';
import {
  ActionButton,
  ConfirmButton,
  ErrorText,
  HostStatusBadge,
  Loading,
  OnceSecret,
  Section,
  StatusBadge,
} from '../../components/ui';
import { fromLocalInput, toLocalInput, when } from '../../format';
import { useAdminHosts } from '../../queries';
import { validate } from '../../validation';

export function UserDetail() {
  const { userId = '' } = useParams();
  const client = useQueryClient();
  const navigate = useNavigate();
  const user = useQuery({ queryKey: ['users', userId], queryFn: () => api.admin.users.get(userId) });
  const hosts = useAdminHosts();
  const [expiry, setExpiry] = useState<string | null>(null);
  const [expiryError, setExpiryError] = useState<string | undefined>();
  const [secret, setSecret] = useState<{ title: string; lines: { label: string; value: string }[] } | null>(
    null,
  );
  const refresh = () => {
    void client.invalidateQueries({ queryKey: ['users'] });
    void client.invalidateQueries({ queryKey: ['stats'] });
  };
  const setStatus = useMutation({
    mutationFn: (status: 'active' | 'disabled') => api.admin.users.setStatus(userId, status),
    onSuccess: refresh,
  });
  const saveExpiry = useMutation({
    mutationFn: (value: string | null) => api.admin.users.setExpiry(userId, value),
    onSuccess: () => {
      setExpiry(null);
      refresh();
    },
  });
  const rotate = useMutation({
    mutationFn: () => api.admin.users.rotatePassword(userId),
    onSuccess: (r) =>
      setSecret({ title: 'New login password', lines: [{ label: 'password', value: r.new_password }] }),
  });
  const regenerate = useMutation({
    mutationFn: () => api.admin.users.regenerateCredentials(userId),
    onSuccess: (r) =>
      setSecret({
        title: 'New user-level SSH credentials',
        lines: [
          { label: 'ssh user', value: r.ssh_user },
          { label: 'ssh password', value: r.ssh_pass },
        ],
      }),
  });
  const remove = useMutation({
    mutationFn: () => api.admin.users.remove(userId),
    onSuccess: () => {
      refresh();
      void client.invalidateQueries({ queryKey: ['hosts'] });
      navigate('/admin/users');
    },
  });

  if (!user.data) return <Loading error={user.error} />;
  const u = user.data;
  const owned = hosts.data?.hosts.filter((h) => h.user_id === u.id) ?? [];
  const expiryValue = expiry ?? toLocalInput(u.expires_at);
  const submitExpiry = (value: string | null) => {
    const message = validate(ExpiryRequest, { expires_at: value }).expires_at;
    setExpiryError(message);
    if (!message) saveExpiry.mutate(value);
  };

  return (
    <>
      <p>
        <Link to="/admin/users">← Users</Link>
      </p>
      <h1>
        {u.username} <StatusBadge status={u.expired ? 'expired' : u.status} />
      </h1>
      <p className="hint">
        {u.role} · short id <code>{u.short_id}</code> · created {when(u.created_at)} ·{' '}
        {u.expires_at ? `expires ${when(u.expires_at)}` : 'never expires'}
      </p>
      {secret ? (
        <OnceSecret title={secret.title} lines={secret.lines} onDone={() => setSecret(null)} />
      ) : null}
      <div className="grid-2">
        <Section title="Access">
          <div className="row wrap">
            {u.status === 'active' ? (
              <ActionButton pending={setStatus.isPending} onClick={() => setStatus.mutate('disabled')}>
                Disable
              </ActionButton>
            ) : (
              <ActionButton
                kind="primary"
                pending={setStatus.isPending}
                onClick={() => setStatus.mutate('active')}
              >
                Enable
              </ActionButton>
            )}
            <ActionButton pending={rotate.isPending} onClick={() => rotate.mutate()}>
              Rotate password
            </ActionButton>
            <ActionButton pending={regenerate.isPending} onClick={() => regenerate.mutate()}>
              Regenerate SSH credentials
            </ActionButton>
          </div>
          <ErrorText error={setStatus.error ?? rotate.error ?? regenerate.error} />
          <div className="spaced" />
          <InputField
            label="Expires"
            error={expiryError ?? saveExpiry.error?.message}
            hint="Empty: never expires"
            type="datetime-local"
            value={expiryValue}
            onChange={setExpiry}
          />
          <div className="row wrap">
            <ActionButton
              kind="primary"
              pending={saveExpiry.isPending && saveExpiry.variables !== null}
              onClick={() => submitExpiry(fromLocalInput(expiryValue))}
            >
              Save expiry
            </ActionButton>
            <ActionButton
              pending={saveExpiry.isPending && saveExpiry.variables === null}
              onClick={() => submitExpiry(null)}
            >
              Never expires
            </ActionButton>
          </div>
        </Section>
        <Section title="Hosts">
          {owned.length === 0 ? (
            <p className="hint">No hosts.</p>
          ) : (
            <ul className="plain-list">
              {owned.map((h) => (
                <li key={h.id}>
                  <Link to={`/admin/hosts/${h.id}`}>{h.short_id}</Link> <HostStatusBadge status={h.status} />
                </li>
              ))}
            </ul>
          )}
          <p>
            <Link to={`/admin/hosts?user=${u.id}`}>Create a host for {u.username}</Link>
          </p>
        </Section>
      </div>
      <KeysPanel
        queryKey={['keys', u.id]}
        keysApi={{
          list: () => api.admin.users.keys.list(u.id),
          add: (body) => api.admin.users.keys.add(u.id, body),
          generate: (body) => api.admin.users.keys.generate(u.id, body),
          remove: (keyId) => api.admin.users.keys.remove(u.id, keyId),
        }}
      />
      <UserResourcesPanel userId={u.id} />
      <UserHostPolicyPanel userId={u.id} />
      <Section title="Delete">
        <ConfirmButton
          label="Delete user"
          confirmLabel={`Delete ${u.username}`}
          pending={remove.isPending}
          onConfirm={() => remove.mutate()}
          question={
            <p>
              Delete <strong>{u.username}</strong> with{' '}
              {owned.length === 1 ? 'its host' : `its ${owned.length} hosts`}
              {owned.length > 0 ? ` (${owned.map((h) => h.short_id).join(', ')})` : ''}, their containers and
              home volumes, and {u.username}'s SSH keys? This cannot be undone.
            </p>
          }
        />
        <ErrorText error={remove.error} />
      </Section>
    </>
  );
}
