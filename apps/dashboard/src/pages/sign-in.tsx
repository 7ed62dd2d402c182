import { LoginRequest } from '@ccp/api';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useEffect } from 'react';
import { useNavigate, useSearchParams } from 'react-router';
import { api } from '../api';
import { InputField } from '../components/field';
import { ThemeToggle } from '../components/layout';
import { ActionButton, ErrorText } from '../components/ui';
import { session } from '../session';
import { useForm } from '../use-form';

export function SignIn() {
  const [params] = useSearchParams();
  const navigate = useNavigate();
  const client = useQueryClient();
  const { values, set, bind, check } = useForm(LoginRequest, { username: '', password: '' });
  const expired = params.has('next');
  // Arriving here ends any session: signing out is a visit to this page. (Ending it on the page that links here
  // would let that page's guard redirect first, with itself as the page to come back to.)
  useEffect(() => {
    if (!session.get()) return;
    session.signOut();
    client.clear();
  }, [client]);
  const login = useMutation({
    mutationFn: () => api.login(values),
    onSuccess: (response) => {
      const signedIn = session.signIn(response);
      set('password', '');
      client.clear();
      const next = params.get('next');
      const home = signedIn.role === 'admin' ? '/admin' : '/portal';
      const prefix = signedIn.role === 'admin' ? '/admin' : '/portal';
      navigate(next?.startsWith(prefix) ? next : home, { replace: true });
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (check(values)) login.mutate();
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
        <InputField label="Username" {...bind('username')} autoComplete="username" />
        <InputField label="Password" {...bind('password')} type="password" autoComplete="current-password" />
        <ActionButton type="submit" kind="primary" pending={login.isPending}>
          Sign in
        </ActionButton>
        <ErrorText error={login.error} />
      </form>
    </div>
  );
}
