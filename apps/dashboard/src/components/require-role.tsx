import type { Role } from '@ccp/api';
import type { ReactNode } from 'react';
import { useSyncExternalStore } from 'react';
import { Navigate, useLocation } from 'react-router';
import { type Session, session } from '../session';

export function useSession(): Session | null {
  return useSyncExternalStore(session.subscribe, session.get);
}

export function signInPath(location: { pathname: string; search: string }): string {
  return `/sign-in?next=${encodeURIComponent(location.pathname + location.search)}`;
}

/** Shows its pages only to a signed-in account of the role; anyone else signs in and comes back here. */
export function RequireRole({ scope, children }: { scope: Role; children: ReactNode }) {
  const current = useSession();
  const location = useLocation();
  if (!current) return <Navigate to={signInPath(location)} replace />;
  if (current.role !== scope)
    return <Navigate to={current.role === 'admin' ? '/admin' : '/portal'} replace />;
  return children;
}
