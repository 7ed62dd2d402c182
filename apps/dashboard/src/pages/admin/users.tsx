import { ApiError, type CreatedUser, CreateUserRequest } from '@ccp/api';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link } from 'react-router';
import { api } from '../../api';
import { DataTable } from '../../components/data-table';
import { InputField } from '../../components/field';
import { ActionButton, ErrorText, Loading, OnceSecret, Section, StatusBadge } from '../../components/ui';
import { fromLocalInput, when } from '../../format';
import { useUsers } from '../../queries';
import { useForm } from '../../use-form';
import { apiFieldErrors } from '../../validation';

const EMPTY_USER = { username: '', password: '', expires: '' };

export function CreateUserForm({ onCreated }: { onCreated: (user: CreatedUser) => void }) {
  const client = useQueryClient();
  const { values, setValues, bind, setErrors, check } = useForm(CreateUserRequest, EMPTY_USER);
  const create = useMutation({
    mutationFn: (body: CreateUserRequest) => api.admin.users.create(body),
    onSuccess: (user) => {
      setValues(EMPTY_USER);
      void client.invalidateQueries({ queryKey: ['users'] });
      void client.invalidateQueries({ queryKey: ['stats'] });
      onCreated(user);
    },
    onError: (error) => setErrors(apiFieldErrors(error)),
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const body: CreateUserRequest = {
      username: values.username,
      password: values.password,
      expires_at: fromLocalInput(values.expires),
    };
    if (check(body)) create.mutate(body);
  };
  return (
    <form className="form-grid" onSubmit={submit} noValidate aria-label="Create user">
      <InputField label="Username" {...bind('username')} autoComplete="off" />
      <InputField label="Password" {...bind('password')} type="password" autoComplete="new-password" />
      <InputField
        label="Expires (optional)"
        {...bind('expires', 'expires_at')}
        hint="Empty: never expires"
        type="datetime-local"
      />
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
          <DataTable
            columns={['Username', 'Role', 'Status', 'Expires', 'Created']}
            rows={users.data.users}
            row={(user) => (
              <>
                <td>
                  <Link to={`/admin/users/${user.id}`}>{user.username}</Link>
                </td>
                <td>{user.role}</td>
                <td>
                  <StatusBadge status={user.expired ? 'expired' : user.status} />
                </td>
                <td>{user.expires_at ? when(user.expires_at) : 'never'}</td>
                <td>{when(user.created_at)}</td>
              </>
            )}
          />
        ) : (
          <Loading error={users.error} />
        )}
      </Section>
    </>
  );
}
