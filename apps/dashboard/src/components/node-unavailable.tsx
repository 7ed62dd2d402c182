import type { Host } from '@ccp/api';
import { Link } from 'react-router';

/**
 * Why a host whose node stopped heartbeating cannot be used, and what brings it back. Admins learn which node
 * and what to restart; users only that the host comes back by itself.
 */
export function NodeUnavailableNotice({ host, scope }: { host: Host; scope: 'admin' | 'user' }) {
  return (
    <div className="notice" role="status" data-testid="node-unavailable">
      {scope === 'admin' ? (
        <>
          <p>
            <strong>Node {host.node} is not heartbeating.</strong> The host&apos;s containers and home are on
            that node: until it returns, nobody can reach the host, and it cannot be started, stopped or
            rebuilt.
          </p>
          <p>
            Start the gateway on that machine again (its own <code>NODE_NAME</code> and <code>DATA_DIR</code>
            ): the host then gets back the status it had. <Link to="/admin">Nodes</Link>
          </p>
        </>
      ) : (
        <p>
          <strong>The machine this host runs on cannot be reached.</strong> Your files stay on it. The host
          comes back by itself, as it was, when that machine returns; if that takes long, ask your
          administrator.
        </p>
      )}
    </div>
  );
}
