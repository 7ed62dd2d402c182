import { lazy, Suspense, useEffect } from 'react';
import { Navigate, Route, Routes, useLocation, useNavigate } from 'react-router';
import { whenSessionExpires } from './api';
import { Layout } from './components/layout';
import { RequireRole, signInPath, useSession } from './components/require-role';
import { Quotas } from './components/resources-panel';
import { EgressIpDetail, EgressIps } from './pages/admin/egress-ips';
import { Events } from './pages/admin/events';
import { HostDetail } from './pages/admin/host-detail';
import { Hosts } from './pages/admin/hosts';
import { Overview } from './pages/admin/overview';
import { Tasks } from './pages/admin/tasks';
import { Traffic } from './pages/admin/traffic';
import { UserDetail } from './pages/admin/user-detail';
import { Users } from './pages/admin/users';
import { PortalAccount, PortalHost, PortalHosts, PortalKeys } from './pages/portal/portal';
import { SignIn } from './pages/sign-in';

/** Sends someone whose token expired to sign-in, remembering the page to come back to. */
/** xterm.js is loaded with the terminal page only: the other pages do not carry it. */
const TerminalPage = lazy(() => import('./pages/terminal').then((page) => ({ default: page.TerminalPage })));

function ExpiryRedirect() {
  const navigate = useNavigate();
  const location = useLocation();
  useEffect(() => {
    whenSessionExpires(() => {
      if (location.pathname !== '/sign-in') navigate(signInPath(location), { replace: true });
    });
  }, [navigate, location]);
  return null;
}

function Home() {
  const current = useSession();
  if (!current) return <Navigate to="/sign-in" replace />;
  return <Navigate to={current.role === 'admin' ? '/admin' : '/portal'} replace />;
}

export function App() {
  return (
    <>
      <ExpiryRedirect />
      <Routes>
        <Route path="/" element={<Home />} />
        <Route path="/sign-in" element={<SignIn />} />
        <Route
          path="/admin"
          element={
            <RequireRole scope="admin">
              <Layout scope="admin" />
            </RequireRole>
          }
        >
          <Route index element={<Overview />} />
          <Route path="users" element={<Users />} />
          <Route path="users/:userId" element={<UserDetail />} />
          <Route path="egress-ips" element={<EgressIps />} />
          <Route path="egress-ips/:ipId" element={<EgressIpDetail />} />
          <Route path="hosts" element={<Hosts />} />
          <Route path="hosts/:hostId" element={<HostDetail />} />
          <Route path="tasks" element={<Tasks />} />
          <Route path="events" element={<Events />} />
          <Route path="quotas" element={<Quotas />} />
          <Route path="traffic" element={<Traffic />} />
        </Route>
        {/* The terminal takes the whole window (a phone's too): outside the frame of the other pages. */}
        <Route
          path="/admin/hosts/:hostId/terminal"
          element={
            <RequireRole scope="admin">
              <Suspense>
                <TerminalPage scope="admin" />
              </Suspense>
            </RequireRole>
          }
        />
        <Route
          path="/portal/hosts/:hostId/terminal"
          element={
            <RequireRole scope="user">
              <Suspense>
                <TerminalPage scope="user" />
              </Suspense>
            </RequireRole>
          }
        />
        <Route
          path="/portal"
          element={
            <RequireRole scope="user">
              <Layout scope="user" />
            </RequireRole>
          }
        >
          <Route index element={<PortalHosts />} />
          <Route path="hosts/:hostId" element={<PortalHost />} />
          <Route path="keys" element={<PortalKeys />} />
          <Route path="account" element={<PortalAccount />} />
        </Route>
        <Route path="*" element={<Home />} />
      </Routes>
    </>
  );
}
