import type { Host } from '@ccp/api';
import { useCliRelease } from '../queries';
import { CopyField, ErrorText } from './ui';

/**
 * How to reach a host: the one-line access command, the SSH details and the command-line client (the desktop:
 * host-desktop.tsx). The client comes from the gateway that serves this page, which serves the API too; its
 * checksum comes from the signed-in API, to hold against what the install line printed.
 */
export function HostAccess({ host, scope }: { host: Host; scope: 'admin' | 'user' }) {
  const release = useCliRelease(scope);
  const sshCommand = `ssh -p ${host.ssh_port} ${host.ssh_user}@${host.ssh_host}`;
  const gateway = window.location.origin;
  return (
    <div className="access">
      <CopyField label="Access command" value={host.access_command} testId="access-command" />
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
      {release.data?.warning ? (
        <div className="notice" role="status" data-testid="ccp-install-warning">
          <p>
            <strong>Not protected in transit.</strong> {release.data.warning}
          </p>
        </div>
      ) : null}
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
