import { useQuery } from '@tanstack/react-query';
import { api } from '../api';
import { useTask } from '../queries';
import { TaskProgressBar } from './ui';

/**
 * The newest task of a host with live progress: the id comes from the action just taken or the task list, and
 * the task itself is kept current by SSE `tasks` messages.
 */
export function HostTask({
  hostId,
  taskId,
  scope,
}: {
  hostId: string;
  taskId: string | null;
  scope: 'admin' | 'user';
}) {
  const latest = useQuery({
    queryKey: ['tasks', { host_id: hostId, limit: 1 }],
    queryFn: () => api.admin.tasks.list({ host_id: hostId, limit: 1 }),
    enabled: scope === 'admin',
  });
  const id = taskId ?? latest.data?.tasks[0]?.id ?? null;
  const task = useTask(id, scope);
  if (!task.data) return null;
  return <TaskProgressBar task={task.data} />;
}
