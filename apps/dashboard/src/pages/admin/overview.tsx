import type { Node } from '@ccp/api';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'react-router';
import { api } from '../../api';
import { DataTable } from '../../components/data-table';
import {
  ActionButton,
  ConfirmButton,
  ErrorText,
  Loading,
  Section,
  StatusBadge,
  TaskProgressBar,
} from '../../components/ui';
import { memory, when, whenExact } from '../../format';
import { useEgressIps, useStats, useTask } from '../../queries';

function Stat({ label, value, to }: { label: string; value: number; to?: string }) {
  const body = (
    <>
      <span className="stat-value">{value}</span>
      <span className="stat-label">{label}</span>
    </>
  );
  return to ? (
    <Link className="stat" to={to}>
      {body}
    </Link>
  ) : (
    <div className="stat">{body}</div>
  );
}

/** Megabytes, for an image's size. */
const megabytes = (bytes: number | null) => (bytes === null ? '' : ` · ${Math.round(bytes / 1e6)} MB`);

/**
 * The managed images (workspace, egress gateway): built or missing, for the tag the current recipe gives, and a
 * build on the gateway's machine (image/build.sh, as a task with its steps as progress).
 */
function Images() {
  const images = useQuery({ queryKey: ['images'], queryFn: api.admin.images });
  const [taskId, setTaskId] = useState<string | null>(null);
  const task = useTask(taskId, 'admin');
  const build = useMutation({
    mutationFn: (rebuild: boolean) => api.admin.buildImages({ rebuild }),
    onSuccess: (accepted) => setTaskId(accepted.task_id),
  });
  if (!images.data) return <Loading error={images.error} />;
  const missing = images.data.images.some((image) => !image.present);
  const building = build.isPending || task.data?.status === 'pending' || task.data?.status === 'running';
  return (
    <>
      <ul className="plain-list" data-testid="images">
        {images.data.images.map((image) => (
          <li key={image.name}>
            <div className="row between wrap">
              <span>
                <strong>{image.name}</strong> <code>{image.tag}</code>
              </span>
              <StatusBadge status={image.present ? 'built' : 'missing'} />
            </div>
            <p className="hint">
              {image.present
                ? `Built ${when(image.created_at)}${megabytes(image.size_bytes)}.`
                : 'Not built: hosts cannot start from it.'}
            </p>
          </li>
        ))}
      </ul>
      <div className="row wrap">
        <ActionButton
          kind={missing ? 'primary' : 'plain'}
          pending={build.isPending && build.variables === false}
          disabled={!missing || building}
          onClick={() => build.mutate(false)}
        >
          Build missing images
        </ActionButton>
        <ActionButton
          pending={build.isPending && build.variables === true}
          disabled={building}
          onClick={() => build.mutate(true)}
        >
          Rebuild all
        </ActionButton>
      </div>
      <p className="hint">
        The gateway runs image/build.sh on its machine, which needs root; Rebuild all takes Debian&apos;s
        updates. Hosts use a new workspace image when they are rebuilt.
      </p>
      <ErrorText error={build.error} />
      {task.data ? <TaskProgressBar task={task.data} /> : null}
    </>
  );
}

/**
 * The gateways sharing the database, one per Docker machine: whether each heartbeats, its load and capacity, and
 * whether new hosts may go there (both images built). They come with the stats, so they follow the same events.
 */
function Nodes({ nodes }: { nodes: Node[] }) {
  const client = useQueryClient();
  const remove = useMutation({
    mutationFn: api.admin.removeNode,
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: ['stats'] });
      void client.invalidateQueries({ queryKey: ['nodes'] });
      void client.invalidateQueries({ queryKey: ['hosts'] });
    },
  });
  return (
    <>
      <DataTable
        testId="nodes"
        columns={['Node', 'State', 'Hosts', 'Running', 'Memory', 'CPUs', 'Images', 'Last heartbeat', '']}
        rows={nodes.map((node) => ({ ...node, id: node.name }))}
        row={(node) => (
          <>
            <td>
              <strong>{node.name}</strong>
              {node.internal_address ? <div className="hint">{node.internal_address}</div> : null}
            </td>
            <td>
              <span
                className={`badge node-${node.state}`}
                title={
                  node.state === 'unavailable'
                    ? 'No heartbeat within NODE_DEAD_SECONDS: its hosts are node unavailable until it returns'
                    : undefined
                }
              >
                {node.state}
              </span>
            </td>
            <td>
              {node.hosts} / {node.max_hosts}
            </td>
            <td>{node.running}</td>
            <td>{memory(node.memory_mb)}</td>
            <td>{node.cpus}</td>
            <td>
              <StatusBadge status={node.images_ready ? 'built' : 'missing'} />
            </td>
            <td title={node.heartbeat_at}>{whenExact(node.heartbeat_at)}</td>
            <td>
              {node.state === 'unavailable' ? (
                <ConfirmButton
                  label="Remove node"
                  confirmLabel={`Remove node ${node.name}`}
                  pending={remove.isPending && remove.variables === node.name}
                  onConfirm={() => remove.mutate(node.name)}
                  question={
                    <p>
                      Remove node <strong>{node.name}</strong> for good? Its {node.hosts} host(s) move to the
                      live nodes, stopped; each one&apos;s next start makes a new workspace there with an
                      empty home, as the old one stays on that machine.
                    </p>
                  }
                />
              ) : null}
            </td>
          </>
        )}
      />
      <ErrorText error={remove.error} />
    </>
  );
}

export function Overview() {
  const stats = useStats();
  const egress = useEgressIps();
  const events = useQuery({ queryKey: ['events', 'recent'], queryFn: () => api.admin.events({ limit: 8 }) });
  const failing = egress.data?.egress_ips.filter((ip) => ip.last_test && !ip.last_test.ok) ?? [];
  const s = stats.data;
  return (
    <>
      <h1>Overview</h1>
      {!s ? (
        <Loading error={stats.error} />
      ) : (
        <div className="stats" data-testid="stats">
          <Stat label="users" value={s.users.total} to="/admin/users" />
          <Stat label="active users" value={s.users.active} />
          <Stat label="hosts" value={s.hosts.total} to="/admin/hosts" />
          <Stat label="egress IPs" value={s.egress_ips.total} to="/admin/egress-ips" />
          <Stat label="tasks running" value={s.tasks.running + s.tasks.pending} to="/admin/tasks" />
          <Stat label="failed tasks (24 h)" value={s.tasks.failed_24h} to="/admin/tasks?status=failed" />
          <Stat label="SSH sessions" value={s.sessions.ssh} />
          <Stat label="desktop sessions" value={s.sessions.vnc} />
        </div>
      )}
      <Section title="Nodes">{s ? <Nodes nodes={s.nodes} /> : <Loading error={stats.error} />}</Section>
      <div className="grid-2">
        <Section title="Hosts by state">
          {s ? (
            <ul className="plain-list">
              {(['running', 'stopped', 'failed'] as const).map((state) => (
                <li key={state} className="row between">
                  <StatusBadge status={state} /> <strong>{s.hosts[state]}</strong>
                </li>
              ))}
              <li className="row between">
                <span>other (created, starting, node unavailable, …)</span>
                <strong>{s.hosts.total - s.hosts.running - s.hosts.stopped - s.hosts.failed}</strong>
              </li>
            </ul>
          ) : null}
        </Section>
        <Section title="Failing egress IPs">
          {failing.length === 0 ? (
            <p className="hint">
              {egress.data ? 'None: every tested egress IP passed its last test.' : 'Loading…'}
            </p>
          ) : (
            <ul className="plain-list">
              {failing.map((ip) => (
                <li key={ip.id}>
                  <Link to={`/admin/egress-ips/${ip.id}`}>{ip.label}</Link> ({ip.ip_address}) · tested{' '}
                  {when(ip.last_test?.tested_at)}
                </li>
              ))}
            </ul>
          )}
        </Section>
      </div>
      <Section title="Images">
        <Images />
      </Section>
      <Section title="Recent events" actions={<Link to="/admin/events">All events</Link>}>
        {events.data ? (
          <ul className="plain-list events">
            {events.data.events.map((event) => (
              <li key={event.id}>
                <span className={`level level-${event.level}`}>{event.level}</span> <code>{event.type}</code>{' '}
                {event.message} <span className="hint">{when(event.created_at)}</span>
              </li>
            ))}
          </ul>
        ) : (
          <Loading error={events.error} />
        )}
      </Section>
    </>
  );
}
