import { useQuery } from '@tanstack/react-query';
import { api } from '../api';
import { taskToShow } from '../host-state';
import { useTask } from '../queries';
import { TaskProgressBar } from './ui';

/** How many of a host's newest tasks are looked through for one that changed something. */
const RECENT = 20;

/**
 * A host's task with live progress: the one just started here, else (for admins) the newest that changed
 * something (taskToShow). The task itself is kept current by SSE `tasks` messages.
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
  const recent = useQuery({
    queryKey: ['tasks', { host_id: hostId, limit: RECENT }],
    queryFn: () => api.admin.tasks.list({ host_id: hostId, limit: RECENT }),
    enabled: scope === 'admin',
  });
  const id = taskId ?? taskToShow(recent.data?.tasks ?? [])?.id ?? null;
  const task = useTask(id, scope);
  if (!task.data) return null;
  return <TaskProgressBar task={task.data} />;
}
