import type { Host, Role } from '@ccp/api';
import { Link } from 'react-router';

/** The way to the host's browser terminal: its tmux sessions, as `ccp` opens them, in this browser. */
export function HostTerminal({ host, scope }: { host: Host; scope: Role }) {
  const running = host.status === 'running';
  const path = `${scope === 'admin' ? '/admin' : '/portal'}/hosts/${host.id}/terminal`;
  return (
    <div className="terminal-entry" data-testid="terminal-entry">
      <div className="row wrap">
        <span>Terminal</span>
        {running ? (
          <Link className="button primary" to={path}>
            Open terminal
          </Link>
        ) : (
          <span className="hint">The host must be running.</span>
        )}
      </div>
      <p className="hint">
        A shell in the workspace's tmux session <code>web</code> (or any other: the terminal lists them), the
        same sessions <code>ccp</code> and SSH join.
      </p>
    </div>
  );
}
