import { useQuery } from '@tanstack/react-query';
import { api } from './api';

/** The shared query keys: SSE events invalidate by these prefixes (see live-updates.ts). */
export const useUsers = () => useQuery({ queryKey: ['users'], queryFn: api.admin.users.list });
export const useEgressIps = () => useQuery({ queryKey: ['egress-ips'], queryFn: api.admin.egressIps.list });
export const useAdminHosts = () => useQuery({ queryKey: ['hosts', 'admin'], queryFn: api.admin.hosts.list });
export const useStats = () => useQuery({ queryKey: ['stats'], queryFn: api.admin.stats });
export const useNodes = () => useQuery({ queryKey: ['nodes'], queryFn: api.admin.nodes });

export function useAdminHost(hostId: string) {
  return useQuery({ queryKey: ['host', hostId], queryFn: () => api.admin.hosts.get(hostId) });
}

/** A task, kept current by the `tasks` SSE topic (no polling). */
export function useTask(taskId: string | null, role: 'admin' | 'user') {
  return useQuery({
    queryKey: ['task', taskId],
    queryFn: () => (role === 'admin' ? api.admin.tasks.get(taskId!) : api.user.tasks.get(taskId!)),
    enabled: taskId !== null,
  });
}

/** ccp's checksum over the signed-in API, and whether its download travels in the clear. */
export function useCliRelease(role: 'admin' | 'user') {
  return useQuery({
    queryKey: ['cli', role],
    queryFn: role === 'admin' ? api.admin.cli : api.user.cli,
    retry: false,
  });
}
