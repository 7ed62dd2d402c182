import type { EgressDecisions } from '@ccp/api';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api';
import { when } from '../format';
import { DataTable } from './data-table';
import { ActionButton, CopyButton, Loading, Section } from './ui';

/**
 * What the host's egress policy blocked, or in log-only mode would have blocked, over the last 24 hours: per
 * destination and port with counts and last seen. "Turn this log into an allow-list" shows the policy with an
 * allow rule for each name and address seen in log-only mode, enforced, and applies it as the host's own policy
 * (a running host follows it at once), or copies it as EGRESS_POLICY takes it.
 */
export function HostEgressDecisions({ hostId, scope }: { hostId: string; scope: 'admin' | 'user' }) {
  const read = useQuery({
    queryKey: ['egress-decisions', scope, hostId],
    queryFn: (): Promise<EgressDecisions> => api[scope].egressDecisions(hostId),
    refetchInterval: 30_000,
  });
  const [showAllowList, setShowAllowList] = useState(false);
  const client = useQueryClient();
  const apply = useMutation({
    mutationFn: (policy: NonNullable<EgressDecisions['allow_list']['policy']>) =>
      api.admin.hosts.setEgressPolicy(hostId, policy),
    onSuccess: (updated) => {
      client.setQueryData(['host', hostId, 'egress-policy'], updated);
      void client.invalidateQueries({ queryKey: ['host', hostId] });
    },
  });
  if (!read.data) return <Loading error={read.error} />;
  const { destinations, uncounted, allow_list: allowList } = read.data;
  const policyText = allowList.policy ? JSON.stringify(allowList.policy) : '';
  return (
    <Section title="Blocked destinations (24 hours)">
      {destinations.length === 0 ? (
        <p className="hint" data-testid="egress-decisions-empty">
          Nothing blocked, and nothing a log-only policy would block.
        </p>
      ) : (
        <DataTable
          testId="egress-decisions"
          columns={['Destination', 'Port', 'Count', 'Last seen', '']}
          rows={destinations.map((row) => ({ ...row, id: `${row.decision} ${row.destination} ${row.port}` }))}
          row={(row) => (
            <>
              <td>
                <code>{row.destination}</code>
              </td>
              <td>{row.port}</td>
              <td>{row.count}</td>
              <td>{when(row.last_seen)}</td>
              <td>{row.decision === 'blocked' ? 'blocked' : 'would be blocked (log-only)'}</td>
            </>
          )}
        />
      )}
      {uncounted.length > 0 && (
        <p className="error" role="alert" data-testid="egress-decisions-uncounted">
          In {uncounted.length} minute{uncounted.length === 1 ? '' : 's'} the host reached more destinations
          than are counted one by one: {uncounted.reduce((sum, row) => sum + row.count, 0)} connections to{' '}
          {uncounted.reduce((sum, row) => sum + row.destinations, 0)} more destinations are only summed.
        </p>
      )}
      {scope === 'admin' && allowList.rules.length > 0 && (
        <div>
          <ActionButton onClick={() => setShowAllowList(!showAllowList)}>
            {showAllowList ? 'Hide the allow-list' : 'Turn this log into an allow-list'}
          </ActionButton>
          {showAllowList && (
            <div data-testid="egress-allow-list">
              <p className="hint">
                {allowList.rules.length} allow rule{allowList.rules.length === 1 ? '' : 's'} for what log-only
                mode let through, ahead of the policy's own rules, enforced. Applied, it becomes this host's
                own policy and its egress gateway follows it within seconds.
              </p>
              {allowList.policy && (
                <ActionButton
                  kind="primary"
                  pending={apply.isPending}
                  onClick={() => allowList.policy && apply.mutate(allowList.policy)}
                >
                  Apply as this host's policy
                </ActionButton>
              )}
              {apply.isSuccess && (
                <p className="hint" data-testid="egress-allow-list-applied">
                  Applied: the host follows the allow-list now.
                </p>
              )}
              {apply.error && (
                <p className="error" role="alert">
                  {apply.error.message}
                </p>
              )}
              <div className="copy-field">
                <span className="copy-label">EGRESS_POLICY</span>
                <pre>{policyText}</pre>
                <CopyButton text={policyText} />
              </div>
            </div>
          )}
        </div>
      )}
    </Section>
  );
}
