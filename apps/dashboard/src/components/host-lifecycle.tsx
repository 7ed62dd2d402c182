import type { Host } from '@ccp/api';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { api } from '../api';
import { timeLeft, when } from '../format';
import { ActionButton, ErrorText } from './ui';

const SIGNALS: Record<string, string> = {
  session: 'someone typed or worked in a session',
  terminal: 'a terminal printed',
  cpu: 'it used CPU',
  network: 'it used the network',
};

const REASONS: Record<string, string> = {
  idle: 'idle: no input in a session, terminal output, CPU or network use',
  lifetime: 'its maximum lifetime',
  schedule: 'its weekly schedule',
  egress_budget: 'its monthly egress budget',
};

/**
 * What keeps the host's cost in check: when it was last active and how, the stop its policy plans (a banner once
 * users were warned) with Extend, and the scheduled start of a stopped host.
 */
export function HostLifecycle({ host, scope }: { host: Host; scope: 'admin' | 'user' }) {
  const client = useQueryClient();
  const extend = useMutation({
    mutationFn: () => api[scope].hosts.extend(host.id),
    onSuccess: (updated) => client.setQueryData(['host', host.id], updated),
  });
  const { last_activity_at, last_activity_signal, planned_stop, planned_start_at } = host.lifecycle;
  const running = host.status === 'running';
  // The time left counts down between the host's updates.
  const [now, setNow] = useState(Date.now);
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 30_000);
    return () => clearInterval(timer);
  }, []);
  return (
    <div data-testid="host-lifecycle">
      {running && planned_stop?.warned_at ? (
        <div className="notice" role="alert" data-testid="stop-warning">
          <p>
            <strong>
              {`This host stops at ${when(planned_stop.at)}, ${timeLeft(planned_stop.at, now)} (${REASONS[planned_stop.reason]}).`}
            </strong>{' '}
            Extend keeps it running; so does <code>ccp extend</code>.
          </p>
        </div>
      ) : null}
      <p className="hint">
        Last active {when(last_activity_at)}
        {last_activity_signal ? ` (${SIGNALS[last_activity_signal]})` : ''}
        {running && planned_stop
          ? ` · stops at ${when(planned_stop.at)}, ${timeLeft(planned_stop.at, now)} (${REASONS[planned_stop.reason]})`
          : ''}
        {!running && planned_start_at
          ? ` · starts at ${when(planned_start_at)}, ${timeLeft(planned_start_at, now)} (its schedule)`
          : ''}
      </p>
      {running && planned_stop ? (
        <ActionButton pending={extend.isPending} onClick={() => extend.mutate()}>
          Extend
        </ActionButton>
      ) : null}
      <ErrorText error={extend.error} />
    </div>
  );
}
