import os from 'node:os';
import type { Node } from '@ccp/api';
import type { Logger } from 'pino';
import type { EventBus } from '../../events/event-bus.js';
import { systemActor } from '../../events/event-bus.js';
import { isoOut, nowIso } from '../../shared/clock.js';
import type { HostsRepository } from '../../store/hosts-repository.js';
import type { NodeRow, NodesRepository, NodeWithLoad } from '../../store/nodes-repository.js';
import { errors } from '../errors.js';
import { type AccessSettings, adminHostView } from '../hosts/host-view.js';

export interface NodeRegistryOptions {
  name: string;
  /** Stable for one DATA_DIR: a gateway restarted on its own data takes its name back at once. */
  instanceId: string;
  maxHosts: number;
  heartbeatSeconds: number;
  deadSeconds: number;
  internalAddress: string | null;
  /** SQLite: the database file belongs to this process alone, so its node name is always its own (a restored
   * backup on another machine included). */
  exclusiveDatabase: boolean;
  /** Whether this node's engine has both images (new hosts go to nodes that do). */
  imagesReady: () => boolean;
}

/**
 * This gateway as a node among those sharing the database: it registers, heartbeats, places new hosts, and
 * notices nodes that went silent (their hosts become `node_unavailable`, never `failed` by guess).
 */
export class NodeRegistry {
  readonly name: string;
  private readonly startedAt = nowIso();

  constructor(
    private readonly nodes: NodesRepository,
    private readonly hosts: HostsRepository,
    private readonly bus: EventBus,
    private readonly access: AccessSettings,
    private readonly options: NodeRegistryOptions,
    private readonly log: Logger,
  ) {
    this.name = options.name;
  }

  /**
   * Takes this node's name in the database, refusing to start while another live process holds it, adopts hosts
   * made before nodes existed, and gives back the hosts it left `node_unavailable`.
   */
  async register(): Promise<void> {
    const row: NodeRow = {
      name: this.name,
      instance_id: this.options.instanceId,
      internal_address: this.options.internalAddress,
      memory_mb: Math.round(os.totalmem() / 1024 / 1024),
      cpus: os.availableParallelism(),
      max_hosts: this.options.maxHosts,
      images_ready: this.options.imagesReady() ? 1 : 0,
      started_at: this.startedAt,
      heartbeat_at: nowIso(),
      left_at: null,
      silence_reported: 0,
    };
    await this.claimName(row);
    const adopted = await this.hosts.adoptUnplaced(this.name);
    if (adopted > 0)
      this.log.info({ node: this.name, hosts: adopted }, 'hosts made before nodes now belong here');
    await this.bus.emit({
      type: 'node.joined',
      message: `node ${this.name} joined${this.options.internalAddress ? ` (internal channel ${this.options.internalAddress})` : ''}`,
      actor: systemActor,
      data: { node: this.name, internal_address: this.options.internalAddress },
    });
    await this.returnHosts();
  }

  /**
   * Takes the name, waiting (once, up to NODE_DEAD_SECONDS) for a holder that may just have died: a gateway
   * restored from a backup, or moved to a new DATA_DIR, finds its old self's last heartbeat. A holder that keeps
   * heartbeating is another live gateway, and this one refuses to start.
   */
  private async claimName(row: NodeRow): Promise<void> {
    const deadline = Date.now() + (this.options.deadSeconds + this.options.heartbeatSeconds) * 1000;
    let warned = false;
    for (;;) {
      const takeOverFrom = this.options.exclusiveDatabase ? '9999' : this.aliveSince();
      if (await this.nodes.claim({ ...row, heartbeat_at: nowIso() }, takeOverFrom)) return;
      if (Date.now() > deadline)
        throw new Error(
          `NODE_NAME "${this.name}" is held by another gateway (another DATA_DIR) that keeps heartbeating; give each gateway its own NODE_NAME`,
        );
      if (!warned) {
        warned = true;
        this.log.warn(
          { node: this.name, waitSeconds: this.options.deadSeconds },
          'another DATA_DIR heartbeated under this NODE_NAME recently; waiting to see whether it is gone',
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }

  /** Says this node is alive, then looks for nodes that are not. */
  async heartbeat(): Promise<void> {
    const held = await this.nodes.heartbeat(
      this.name,
      this.options.instanceId,
      nowIso(),
      this.options.imagesReady(),
    );
    if (held) {
      // A pause longer than NODE_DEAD_SECONDS (a stalled database) got this node's hosts marked: they are back.
      await this.returnHosts();
    } else if (!(await this.nodes.findByName(this.name))) {
      await this.rejoin();
    } else {
      this.log.error(
        { node: this.name },
        'another gateway took this NODE_NAME after this one was silent too long; give each gateway its own name',
      );
    }
    await this.markSilentNodes();
  }

  /**
   * Deletes a node an administrator removed for good; refused (409 `node_live`) while it heartbeats, this gateway
   * included. Answers its hosts, to be placed elsewhere.
   */
  async removeSilent(name: string): Promise<string[]> {
    const node = (await this.list()).find((candidate) => candidate.name === name);
    if (!node) throw errors.notFound('Node');
    const live = () =>
      errors.conflict(
        'node_live',
        `Node ${name} is heartbeating; only a node whose gateway is stopped or gone can be removed`,
      );
    if (node.state === 'up') throw live();
    const hostIds = await this.hosts.idsOnNode(name);
    if (!(await this.nodes.removeSilent(name, this.aliveSince()))) throw live();
    return hostIds;
  }

  /** On shutdown: other gateways stop placing hosts here and mark its hosts `node_unavailable` until it is back. */
  async leave(): Promise<void> {
    await this.nodes.leave(this.name, this.options.instanceId);
  }

  /**
   * Hosts of nodes silent longer than NODE_DEAD_SECONDS, or stopped, become `node_unavailable` (each host marked
   * once, by whichever gateway gets there first); the silence itself is logged once in all.
   */
  async markSilentNodes(): Promise<void> {
    const since = this.aliveSince();
    for (const node of await this.nodes.list()) {
      if (node.name === this.name || (node.heartbeat_at >= since && node.left_at === null)) continue;
      const marked = await this.hosts.markNodeUnavailable(node.name, nowIso());
      if (await this.nodes.claimSilence(node.name, since)) {
        const why = node.left_at
          ? `stopped at ${isoOut(node.left_at)}`
          : `has not been heard from since ${isoOut(node.heartbeat_at)}`;
        await this.bus.emit({
          type: 'node.unavailable',
          level: node.left_at ? 'warn' : 'error',
          message: `node ${node.name} ${why}; its hosts are unavailable until it returns`,
          actor: systemActor,
          data: {
            node: node.name,
            last_heartbeat_at: isoOut(node.heartbeat_at),
            stopped: node.left_at !== null,
            // All of its hosts, whichever gateway marked them.
            hosts: node.hosts,
          },
        });
      }
      for (const hostId of marked) await this.hostEvent(hostId, 'host.node_unavailable', node.name);
    }
  }

  /** Where a new host goes: the pinned node, or the least loaded live node with room, preferring those with images. */
  async place(pinned?: string): Promise<string> {
    const live = (await this.list()).filter((node) => node.state === 'up');
    if (pinned) {
      const node = live.find((candidate) => candidate.name === pinned);
      if (!node)
        throw errors.conflict(
          'node_unavailable',
          `Node ${pinned} is not registered or not heartbeating; pick one of: ${live.map((n) => n.name).join(', ') || 'none'}`,
        );
      return node.name;
    }
    const withRoom = live.filter((node) => node.hosts < node.max_hosts);
    if (withRoom.length === 0)
      throw errors.conflict('no_node_available', 'No live node has room for another host (NODE_MAX_HOSTS)');
    const ready = withRoom.filter((node) => node.images_ready);
    const candidates = ready.length > 0 ? ready : withRoom;
    candidates.sort((a, b) => a.hosts / a.max_hosts - b.hosts / b.max_hosts || a.name.localeCompare(b.name));
    return candidates[0]!.name;
  }

  /** Every node; this one is `up` for as long as this process runs, whatever its last heartbeat says. */
  async list(): Promise<Node[]> {
    const since = this.aliveSince();
    return (await this.nodes.list()).map((node) =>
      nodeView(node.name === this.name ? { ...node, heartbeat_at: nowIso(), left_at: null } : node, since),
    );
  }

  /** Whether `node` is this gateway's own. */
  isLocal(node: string | null): boolean {
    return node === this.name;
  }

  async find(name: string): Promise<NodeRow | undefined> {
    return this.nodes.findByName(name);
  }

  /**
   * This node was removed by an administrator while it was silent and is back: it joins again as a new node
   * (its former hosts were placed elsewhere; the gateway's reaction to `node.rejoined` stops what its engine still
   * runs for them).
   */
  private async rejoin(): Promise<void> {
    this.log.warn({ node: this.name }, 'this node was removed while it was silent; joining again');
    await this.register();
    await this.bus.emit({
      type: 'node.rejoined',
      level: 'warn',
      message: `node ${this.name} was removed while it was silent and joined again; its former hosts stay where they were placed`,
      actor: systemActor,
      data: { node: this.name },
    });
  }

  private async returnHosts(): Promise<void> {
    const returned = await this.hosts.restoreFromNodeLoss(this.name, nowIso());
    if (returned.length === 0) return;
    await this.bus.emit({
      type: 'node.returned',
      message: `node ${this.name} is back; its ${returned.length} host(s) are checked against its engine`,
      actor: systemActor,
      data: { node: this.name, hosts: returned.length },
    });
    for (const hostId of returned) await this.hostEvent(hostId, 'host.node_returned', this.name);
  }

  private async hostEvent(
    hostId: string,
    type: 'host.node_unavailable' | 'host.node_returned',
    node: string,
  ): Promise<void> {
    const host = await this.hosts.findById(hostId);
    if (!host) return;
    const view = await adminHostView(this.hosts, host, this.access);
    await this.bus.emit({
      type,
      level: type === 'host.node_unavailable' ? 'error' : 'info',
      message:
        type === 'host.node_unavailable'
          ? `host ${host.short_id} is unavailable: its node ${node} is not heartbeating`
          : `host ${host.short_id} is back with its node ${node} (${host.status})`,
      actor: systemActor,
      userId: host.user_id,
      hostId,
      data: { node },
      host: view,
    });
  }

  private aliveSince(): string {
    return new Date(Date.now() - this.options.deadSeconds * 1000).toISOString();
  }
}

function nodeView(node: NodeWithLoad, aliveSince: string): Node {
  return {
    name: node.name,
    state: node.heartbeat_at >= aliveSince && node.left_at === null ? 'up' : 'unavailable',
    internal_address: node.internal_address,
    memory_mb: node.memory_mb,
    cpus: node.cpus,
    max_hosts: node.max_hosts,
    hosts: node.hosts,
    running: node.running,
    images_ready: node.images_ready === 1,
    started_at: isoOut(node.started_at),
    heartbeat_at: isoOut(node.heartbeat_at),
  };
}
