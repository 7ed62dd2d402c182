import { ApiError, type Host, type PortShare, type ReceivedPortShare, type Role } from '@ccp/api';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api';
import { ActionButton, Section } from './ui';

function reasonOf(error: unknown): string {
  if (error instanceof ApiError) return `${error.message} (${error.code})`;
  return error instanceof Error ? error.message : String(error);
}

function Failure({ what, error }: { what: string; error: unknown }) {
  if (!error) return null;
  return (
    <p className="error" role="alert">
      {what} failed: {reasonOf(error)}
    </p>
  );
}

/**
 * Opens a share in a new tab through a one-time entry (the account's token never goes in its URL). The tab opens
 * at the click, so it is not taken for a pop-up, then goes to the share's own origin.
 */
async function openShare(share: Pick<PortShare, 'id'>, scope: Role): Promise<void> {
  const tab = window.open('', '_blank');
  if (!tab) throw new Error('The browser did not open a new tab (a pop-up blocker?)');
  tab.opener = null;
  try {
    tab.location.replace((await api[scope].hosts.shares.ticket(share.id)).url);
  } catch (error) {
    tab.close();
    throw error;
  }
}

/**
 * A host's shared ports: the ports its workspace listens on, each with its shares (private, named users, a link
 * that expires), to open, revoke or share; a new link is shown once, to copy.
 */
export function HostShares({ host, scope }: { host: Host; scope: Role }) {
  const client = useQueryClient();
  const running = host.status === 'running';
  const ports = useQuery({
    queryKey: ['ports', host.id],
    queryFn: () => api[scope].hosts.shares.ports(host.id),
    enabled: running,
  });
  const shares = useQuery({
    queryKey: ['shares', host.id],
    queryFn: () => api[scope].hosts.shares.list(host.id),
  });
  const [usernames, setUsernames] = useState('');
  const [linkHours, setLinkHours] = useState('');
  const [link, setLink] = useState<string | null>(null);
  const refresh = () => client.invalidateQueries({ queryKey: ['shares', host.id] });
  const create = useMutation({
    mutationFn: (port: number) => {
      const names = usernames
        .split(/[\s,]+/)
        .map((name) => name.trim())
        .filter(Boolean);
      const hours = Number(linkHours);
      return api[scope].hosts.shares.create(host.id, {
        port,
        ...(names.length > 0 ? { usernames: names } : {}),
        ...(hours > 0 ? { link_expires_in_seconds: Math.round(hours * 3600) } : {}),
      });
    },
    onSuccess: (created) => {
      setLink(created.link_url);
      void refresh();
    },
  });
  const revoke = useMutation({
    mutationFn: (share: PortShare) => api[scope].hosts.shares.revoke(host.id, share.id),
    onSuccess: () => void refresh(),
  });
  const open = useMutation({ mutationFn: (share: PortShare) => openShare(share, scope) });
  const listed = shares.data?.items ?? [];
  const listening = ports.data?.items ?? [];
  const portsShown = [...new Set([...listening.map((p) => p.port), ...listed.map((s) => s.port)])].sort(
    (a, b) => a - b,
  );
  return (
    <div className="shares" data-testid="host-shares">
      <p>Shared ports</p>
      <p className="hint">
        A web app in the workspace (a dev server, a preview), served on an origin of its own: private to you
        by default, or shared with named users, or by a link that expires.
      </p>
      {!running ? <p className="hint">The host must be running to see the ports it listens on.</p> : null}
      {ports.isError ? (
        <p className="error" role="alert">
          Listing the ports failed: {reasonOf(ports.error)}
        </p>
      ) : null}
      <div className="row wrap">
        <label>
          Share with (usernames){' '}
          <input value={usernames} onChange={(event) => setUsernames(event.target.value)} />
        </label>
        <label>
          Link for hours (empty: no link){' '}
          <input
            inputMode="decimal"
            value={linkHours}
            onChange={(event) => setLinkHours(event.target.value)}
          />
        </label>
      </div>
      {portsShown.length === 0 && running && ports.isSuccess ? (
        <p className="hint">Nothing in the workspace listens on a port that can be shared (1024–65535).</p>
      ) : null}
      <ul>
        {portsShown.map((port) => (
          <li key={port}>
            <span>
              Port {port}
              {listening.some((p) => p.port === port) ? '' : ' (not listening now)'}
            </span>{' '}
            <ActionButton
              pending={create.isPending && create.variables === port}
              onClick={() => create.mutate(port)}
            >
              Share
            </ActionButton>
            <ul>
              {listed
                .filter((share) => share.port === port)
                .map((share) => (
                  <li key={share.id}>
                    <code>{share.origin}</code>{' '}
                    {share.usernames.length > 0 ? `with ${share.usernames.join(', ')}` : 'private'}
                    {share.link_expires_at
                      ? ` · link until ${new Date(share.link_expires_at).toLocaleString()}`
                      : ''}{' '}
                    <ActionButton
                      pending={open.isPending && open.variables === share}
                      onClick={() => open.mutate(share)}
                    >
                      Open
                    </ActionButton>{' '}
                    <ActionButton
                      pending={revoke.isPending && revoke.variables === share}
                      onClick={() => revoke.mutate(share)}
                    >
                      Revoke
                    </ActionButton>
                  </li>
                ))}
            </ul>
          </li>
        ))}
      </ul>
      {link ? (
        <p>
          The link (shown once): <code data-testid="share-link">{link}</code>{' '}
          <ActionButton onClick={() => void navigator.clipboard?.writeText(link)}>Copy link</ActionButton>
        </p>
      ) : null}
      <Failure what="Sharing" error={create.error} />
      <Failure what="Revoking" error={revoke.error} />
      <Failure what="Opening" error={open.error} />
    </div>
  );
}

/**
 * Ports of other users' hosts shared with the signed-in user by name, each to open in a new tab (no SSE topic
 * carries other users' shares: the list is fetched each time the page is shown).
 */
export function SharedWithMe() {
  const shared = useQuery({ queryKey: ['shared-with-me'], queryFn: api.user.sharedWithMe, staleTime: 0 });
  const open = useMutation({ mutationFn: (share: ReceivedPortShare) => openShare(share, 'user') });
  const items = shared.data?.items ?? [];
  return (
    <Section title="Shared with me">
      <div data-testid="shared-with-me">
        <Failure what="Listing what is shared with you" error={shared.error} />
        {shared.isSuccess && items.length === 0 ? (
          <p className="hint">No one has shared a port of their host with you.</p>
        ) : null}
        <ul>
          {items.map((share) => (
            <li key={share.id}>
              <span>
                Port {share.port} of host {share.host_short_id}, shared by {share.owner_username}
              </span>{' '}
              <code>{share.origin}</code>{' '}
              <ActionButton
                pending={open.isPending && open.variables === share}
                onClick={() => open.mutate(share)}
              >
                Open
              </ActionButton>
            </li>
          ))}
        </ul>
        <Failure what="Opening" error={open.error} />
      </div>
    </Section>
  );
}
