import type { Host } from '@ccp/api';
import { CopyField } from './ui';

/** How to reach a host over SSH: the one-line access command and the SSH details (the desktop: host-desktop.tsx). */
export function HostAccess({ host }: { host: Host }) {
  const sshCommand = `ssh -p ${host.ssh_port} ${host.ssh_user}@${host.ssh_host}`;
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
    </div>
  );
}
