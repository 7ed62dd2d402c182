import type { Host } from '@ccp/api';
import { pageInTheClearWarning } from '../page-transport';
import { useCliRelease } from '../queries';
import { CopyField, ErrorText } from './ui';

/** What travels in the clear, said beside the line it concerns. */
function InTheClear({ warning, testId }: { warning: string | null | undefined; testId: string }) {
  if (!warning) return null;
  return (
    <div className="notice" role="status" data-testid={testId}>
      <p>
        <strong>Not protected in transit.</strong> {warning}
      </p>
    </div>
  );
}

/**
 * How to reach a host: the one-line access command, the SSH details and the command-line client (the desktop:
 * host-desktop.tsx). The client comes from the gateway that serves this page, which serves the API too; its
 * checksum comes from the signed-in API, to hold against what the install line printed. Where a line crosses a
 * network in the clear, a notice beside it says so: the access command by the gateway's word (the same its script
 * prints), the install line by the gateway's for PUBLIC_API_URL and by this page's own address.
 */
export function HostAccess({ host, scope }: { host: Host; scope: 'admin' | 'user' }) {
  const release = useCliRelease(scope);
  const sshCommand = `ssh -p ${host.ssh_port} ${host.ssh_user}@${host.ssh_host}`;
  const gateway = window.location.origin;
  return (
    <div className="access">
      <CopyField label="Access command" value={host.access_command} testId="access-command" />
      <InTheClear warning={host.access_warning} testId="access-command-warning" />
      <CopyField label="SSH" value={sshCommand} testId="ssh-command" />
      <CopyField label="SSH user" value={host.ssh_user} />
      <CopyField label="SSH host" value={`${host.ssh_host}:${host.ssh_port}`} />
      <p className="hint" data-testid="ssh-password-hint">
        SSH takes the account's own password, the one that signs in here (or an SSH key). The separate SSH
        password shown when the account was made works too, for tools that keep a password of their own.
      </p>
      <CopyField
        label="Install ccp"
        value={`curl -fsSL ${gateway}/v1/cli/install | sh`}
        testId="ccp-install"
      />
      <InTheClear warning={release.data?.warning} testId="ccp-install-warning" />
      <InTheClear warning={pageInTheClearWarning(gateway)} testId="page-transport-warning" />
      {release.data ? (
        <>
          <CopyField label="ccp checksum (SHA-256)" value={release.data.sha256} testId="ccp-checksum" />
          <p className="hint">
            The install line prints the checksum of what it installed: it must be this one.
          </p>
        </>
      ) : (
        <ErrorText error={release.error} />
      )}
      <CopyField
        label="Then, in a project folder"
        value={`ccp init --gateway ${gateway} --short-id ${host.short_id} && ccp`}
        testId="ccp-init"
      />
    </div>
  );
}
