import { LoginRequest } from '@ccp/api';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useEffect, useState } from 'react';
import { useNavigate, useSearchParams } from 'react-router';
import { api } from '../api';
import { ThemeToggle } from '../components/layout';
import { ActionButton, ErrorText, Field } from '../components/ui';
import { session } from '../session';
import { type FieldErrors, validate } from '../validation';

export function SignIn() {
  const [params] = useSearchParams();
  const navigate = useNavigate();
  const client = useQueryClient();
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [errors, setErrors] = useState<FieldErrors>({});
  const expired = params.has('next');
  // Arriving here ends any session: signing out is a visit to this page. (Ending it on the page that links here
  // would let that page's guard redirect first, with itself as the page to come back to.)
  useEffect(() => {
    if (!session.get()) return;
    session.signOut();
    client.clear();
  }, [client]);
  const login = useMutation({
    mutationFn: () => api.login({ username, password }),
    onSuccess: (response) => {
      const signedIn = session.signIn(response);
      setPassword('');
      client.clear();
      const next = params.get('next');
      const home = signedIn.role === 'admin' ? '/admin' : '/portal';
      const prefix = signedIn.role === 'admin' ? '/admin' : '/portal';
      navigate(next?.startsWith(prefix) ? next : home, { replace: true });
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const found = validate(LoginRequest, { username, password });
    setErrors(found);
    if (Object.keys(found).length === 0) login.mutate();
  };
  return (
    <div className="sign-in">
      <form className="card narrow" onSubmit={submit} noValidate>
        <div className="row between">
          <h1>Sign in</h1>
          <ThemeToggle />
        </div>
        {expired ? <p className="hint">Sign in to continue where you were.</p> : null}
        {params.has('changed') ? <p className="ok">Password changed. Sign in with the new one.</p> : null}
        <Field label="Username" error={errors.username}>
          {(id) => (
            <input
              id={id}
              autoComplete="username"
              value={username}
              onChange={(e) => setUsername(e.target.value)}
            />
          )}
        </Field>
        <Field label="Password" error={errors.password}>
          {(id) => (
            <input
              id={id}
              type="password"
              autoComplete="current-password"
              value={password}
              onChange={(e) => setPassword(e.target.value)}
            />
          )}
        </Field>
        <ActionButton type="submit" kind="primary" pending={login.isPending}>
          Sign in
        </ActionButton>
        <ErrorText error={login.error} />
      </form>
    </div>
  );
}
