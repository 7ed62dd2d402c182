import type { Role } from '@ccp/api';
import { useEffect, useState } from 'react';
import { NavLink, Outlet, useNavigate } from 'react-router';
import { useLiveUpdates } from '../live-updates';
import { applyTheme, initialTheme, type Theme } from '../theme';
import { useSession } from './require-role';

const NAV: Record<Role, { to: string; label: string; end?: boolean }[]> = {
  admin: [
    { to: '/admin', label: 'Overview', end: true },
    { to: '/admin/users', label: 'Users' },
    { to: '/admin/egress-ips', label: 'Egress IPs' },
    { to: '/admin/hosts', label: 'Hosts' },
    { to: '/admin/tasks', label: 'Tasks' },
    { to: '/admin/events', label: 'Events' },
    { to: '/admin/quotas', label: 'Quotas' },
    { to: '/admin/traffic', label: 'Traffic' },
  ],
  user: [
    { to: '/portal', label: 'My hosts', end: true },
    { to: '/portal/keys', label: 'SSH keys' },
    { to: '/portal/account', label: 'Account' },
  ],
};

export function ThemeToggle() {
  const [theme, setTheme] = useState<Theme>(initialTheme);
  useEffect(() => applyTheme(theme), [theme]);
  return (
    <button
      type="button"
      className="button plain small"
      onClick={() => setTheme(theme === 'dark' ? 'light' : 'dark')}
      aria-label="Switch light or dark theme"
    >
      {theme === 'dark' ? 'Light' : 'Dark'}
    </button>
  );
}

/** The frame of every signed-in page: navigation, live-connection state, theme and sign-out. */
export function Layout({ scope }: { scope: Role }) {
  const live = useLiveUpdates(scope);
  const current = useSession();
  const navigate = useNavigate();
  const [open, setOpen] = useState(false);
  return (
    <div className="shell">
      <header className="topbar">
        <button
          type="button"
          className="button plain small menu"
          onClick={() => setOpen(!open)}
          aria-expanded={open}
        >
          Menu
        </button>
        <strong className="brand">cloud-cli-proxy</strong>
        <span className={`live live-${live}`} data-testid="live-state" title="Live updates">
          {live === 'live' ? 'live' : live === 'connecting' ? 'connecting…' : 'reconnecting…'}
        </span>
        <span className="spacer" />
        <span className="hint">{current?.username}</span>
        <ThemeToggle />
        <button
          type="button"
          className="button plain small"
          onClick={() => {
            navigate('/sign-in');
          }}
        >
          Sign out
        </button>
      </header>
      <nav className={open ? 'sidebar open' : 'sidebar'} aria-label="Main">
        {NAV[scope].map((item) => (
          <NavLink key={item.to} to={item.to} end={item.end} onClick={() => setOpen(false)}>
            {item.label}
          </NavLink>
        ))}
      </nav>
      <main className="content">
        <Outlet />
      </main>
    </div>
  );
}
