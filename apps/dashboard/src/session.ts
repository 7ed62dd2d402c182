import type { LoginResponse, Role } from '@ccp/api';

export interface Session {
  token: string;
  role: Role;
  username: string;
  userId: string;
  expiresAt: string;
}

// sessionStorage (not localStorage): the token lives only as long as the tab, and sign-out removes it at once.
const KEY = 'ccp.session';
const listeners = new Set<() => void>();

function read(): Session | null {
  try {
    const raw = sessionStorage.getItem(KEY);
    if (!raw) return null;
    const session = JSON.parse(raw) as Session;
    return Date.parse(session.expiresAt) > Date.now() ? session : null;
  } catch {
    return null;
  }
}

let current: Session | null = read();

function set(next: Session | null): void {
  current = next;
  if (next) sessionStorage.setItem(KEY, JSON.stringify(next));
  else sessionStorage.removeItem(KEY);
  for (const listener of listeners) listener();
}

export const session = {
  get: (): Session | null => current,
  token: (): string | null => current?.token ?? null,
  signIn(login: LoginResponse): Session {
    const next = {
      token: login.token,
      role: login.role,
      username: login.user.username,
      userId: login.user.id,
      expiresAt: login.expires_at,
    };
    set(next);
    return next;
  },
  signOut: (): void => set(null),
  subscribe(listener: () => void): () => void {
    listeners.add(listener);
    return () => listeners.delete(listener);
  },
};
