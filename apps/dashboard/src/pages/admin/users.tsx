import { ApiError, type CreatedUser, CreateUserRequest } from '@ccp/api';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link } from 'react-router';
import { api } from '../../api';
import {
  ActionButton,
  ErrorText,
  Field,
  Loading,
  OnceSecret,
  Section,
  StatusBadge,
} from '../../components/ui';
import { fromLocalInput, when } from '../../format';
import { useUsers } from '../../queries';
import { apiFieldErrors, type FieldErrors, validate } from '../../validation';

export function CreateUserForm({ onCreated }: { onCreated: (user: CreatedUser) => void }) {
  const client = useQueryClient();
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [expires, setExpires] = useState('');
  const [errors, setErrors] = useState<FieldErrors>({});
  const create = useMutation({
    mutationFn: (body: CreateUserRequest) => api.admin.users.create(body),
    onSuccess: (user) => {
      setUsername('');
      setPassword('');
      setExpires('');
      void client.invalidateQueries({ queryKey: ['users'] });
      void client.invalidateQueries({ queryKey: ['stats'] });
      onCreated(user);
    },
    onError: (error) => setErrors(apiFieldErrors(error)),
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const body: CreateUserRequest = { username, password, expires_at: fromLocalInput(expires) };
    const found = validate(CreateUserRequest, body);
    setErrors(found);
    if (Object.keys(found).length === 0) create.mutate(body);
  };
  return (
    <form className="form-grid" onSubmit={submit} noValidate aria-label="Create user">
      <Field label="Username" error={errors.username}>
        {(id) => (
          <input id={id} value={username} onChange={(e) => setUsername(e.target.value)} autoComplete="off" />
        )}
      </Field>
      <Field label="Password" error={errors.password}>
        {(id) => (
          <input
            id={id}
            type="password"
            value={password}
            onChange={(e) => setPassword(e.target.value)}
            autoComplete="new-password"
          />
        )}
      </Field>
      <Field label="Expires (optional)" error={errors.expires_at} hint="Empty: never expires">
        {(id) => (
          <input id={id} type="datetime-local" value={expires} onChange={(e) => setExpires(e.target.value)} />
        )}
      </Field>
      <div className="form-actions">
        <ActionButton type="submit" kind="primary" pending={create.isPending}>
          Create user
        </ActionButton>
        {create.error && !(create.error instanceof ApiError && create.error.body.details) ? (
          <ErrorText error={create.error} />
        ) : null}
      </div>
    </form>
  );
}

export function Users() {
  const users = useUsers();
  const [created, setCreated] = useState<CreatedUser | null>(null);
  return (
    <>
      <h1>Users</h1>
      <Section title="New user">
        <CreateUserForm onCreated={setCreated} />
        {created ? (
          <OnceSecret
            title={`User ${created.username} created. User-level SSH credentials:`}
            lines={[
              { label: 'ssh user', value: created.ssh_credentials.ssh_user },
              { label: 'ssh password', value: created.ssh_credentials.ssh_pass },
            ]}
            onDone={() => setCreated(null)}
          />
        ) : null}
      </Section>
      <Section title="All users">
        {users.data ? (
          <div className="table-wrap">
            <table>
              <thead>
                <tr>
                  <th>Username</th>
                  <th>Role</th>
                  <th>Status</th>
                  <th>Expires</th>
                  <th>Created</th>
                </tr>
              </thead>
              <tbody>
                {users.data.users.map((user) => (
                  <tr key={user.id}>
                    <td>
                      <Link to={`/admin/users/${user.id}`}>{user.username}</Link>
                    </td>
                    <td>{user.role}</td>
                    <td>
                      <StatusBadge status={user.expired ? 'expired' : user.status} />
                    </td>
                    <td>{user.expires_at ? when(user.expires_at) : 'never'}</td>
                    <td>{when(user.created_at)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : (
          <Loading error={users.error} />
        )}
      </Section>
    </>
  );
}
