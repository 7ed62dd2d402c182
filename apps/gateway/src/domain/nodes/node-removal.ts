import type { Actor } from '@ccp/api';
import type { EventBus } from '../../events/event-bus.js';
import { nowIso } from '../../shared/clock.js';
import type { HostsRepository } from '../../store/hosts-repository.js';
import { type AccessSettings, adminHostView } from '../hosts/host-view.js';
import type { TaskRunner } from '../tasks/task-runner.js';
import type { NodeRegistry } from './node-registry.js';

/**
 * Removing a node that is gone for good (its machine lost): without it, its hosts would wait for it forever and
 * could be neither started nor deleted.
 */
export class NodeRemoval {
  constructor(
    private readonly nodes: NodeRegistry,
    private readonly hosts: HostsRepository,
    private readonly tasks: TaskRunner,
    private readonly bus: EventBus,
    private readonly access: AccessSettings,
  ) {}

  /**
   * Removes a silent or stopped node: its unfinished tasks fail, and its hosts are placed on live nodes, stopped,
   * keeping their owner, bindings and SSH details; their next start makes a new workspace there (the old one and
   * its home volume stayed on the lost machine, and stop running if it ever comes back).
   */
  async remove(name: string, actor: Actor): Promise<void> {
    const hostIds = await this.nodes.removeSilent(name);
    const tasksFailed = await this.tasks.failOfRemovedNode(name, actor);
    for (const hostId of hostIds) {
      // A full installation still takes the hosts: this gateway is live, and they are stopped.
      const to = await this.nodes.place().catch(() => this.nodes.name);
      const reason = `Its node ${name} was removed; its workspace and home volume stayed on that machine. The next start makes a new workspace on node ${to}.`;
      if (!(await this.hosts.moveFromRemovedNode(hostId, name, to, reason, nowIso()))) continue;
      const host = await this.hosts.findById(hostId);
      if (!host) continue;
      await this.bus.emit({
        type: 'host.moved',
        level: 'warn',
        message: `host ${host.short_id} moved from removed node ${name} to node ${to}, stopped; its next start makes a new workspace with an empty home`,
        actor,
        userId: host.user_id,
        hostId,
        data: { from_node: name, to_node: to },
        host: await adminHostView(this.hosts, host, this.access),
      });
    }
    await this.bus.emit({
      type: 'node.removed',
      level: 'warn',
      message: `node ${name} removed: ${hostIds.length} host(s) placed on other nodes, ${tasksFailed} unfinished task(s) failed`,
      actor,
      data: { node: name, hosts: hostIds.length, tasks_failed: tasksFailed },
    });
  }
}
