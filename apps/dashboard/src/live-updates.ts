import type { Host, ImageList, Role, SseMessage, Task } from '@ccp/api';
import { type QueryClient, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { api } from './api';

export type LiveState = 'connecting' | 'live' | 'reconnecting';

/** Applies one server event to the cache: payloads replace cached items, lists and counts are re-read. */
function apply(client: QueryClient, message: SseMessage): void {
  switch (message.topic) {
    case 'hosts':
      if (message.action === 'delete') client.removeQueries({ queryKey: ['host', message.id] });
      else if (message.payload) client.setQueryData(['host', message.id], message.payload as Host);
      // The desktop follows its host (no topic of its own): a started or stopped host changes its state.
      void client.invalidateQueries({ queryKey: ['vnc', message.id] });
      void client.invalidateQueries({ queryKey: ['hosts'] });
      // The stats carry the nodes too: a host made, deleted or lost with its node changes their counts and state.
      void client.invalidateQueries({ queryKey: ['stats'] });
      void client.invalidateQueries({ queryKey: ['nodes'] });
      void client.invalidateQueries({ queryKey: ['egress-ips'] });
      break;
    case 'tasks':
      if (message.payload) client.setQueryData(['task', message.id], message.payload as Task);
      void client.invalidateQueries({ queryKey: ['tasks'] });
      void client.invalidateQueries({ queryKey: ['stats'] });
      void client.invalidateQueries({ queryKey: ['events'] });
      break;
    case 'egress-ips':
      void client.invalidateQueries({ queryKey: ['egress-ips'] });
      void client.invalidateQueries({ queryKey: ['stats'] });
      break;
    case 'nodes':
      void client.invalidateQueries({ queryKey: ['stats'] });
      void client.invalidateQueries({ queryKey: ['nodes'] });
      break;
    case 'image-status':
      // The payload is the list itself; re-reading it would check the images again and announce that too.
      if (message.payload) client.setQueryData(['images'], message.payload as ImageList);
      break;
  }
}

/** Keeps the query cache current from the role's SSE stream; after a reconnect everything is re-read. */
export function useLiveUpdates(role: Role): LiveState {
  const client = useQueryClient();
  const [state, setState] = useState<LiveState>('connecting');
  useEffect(() => {
    let opened = false;
    const subscription = api.subscribe(role, {
      onMessage: (message) => apply(client, message),
      onOpen: () => {
        // Events may have been missed while the stream was down: resync every cached query.
        if (opened) void client.invalidateQueries();
        opened = true;
        setState('live');
      },
      onDisconnect: () => setState('reconnecting'),
    });
    return () => subscription.close();
  }, [client, role]);
  return state;
}
