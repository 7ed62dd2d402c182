import { randomUUID } from 'node:crypto';
import type { Actor, Binding, CreatedHost, Host, HostResourcesRequest } from '@ccp/api';
import type { EventBus } from '../../events/event-bus.js';
import { isoOut, nowIso } from '../../shared/clock.js';
import type { EgressIpsRepository } from '../../store/egress-ips-repository.js';
import { violates } from '../../store/errors.js';
import type { HostsRepository, HostWithOwner } from '../../store/hosts-repository.js';
import type { UsersRepository } from '../../store/users-repository.js';
import type { Access } from '../access/access.js';
import { type HostGrant, hostOf } from '../access/grants.js';
import type { Principal } from '../access/principal.js';
import type { SecretBox } from '../access/secret-box.js';
import { generateShortId } from '../access/secrets.js';
import { errors } from '../errors.js';
import type { ResourcesService } from '../quotas/resources-service.js';
import { generateEd25519 } from '../users/ssh-public-key.js';
import type { UsersService } from '../users/users-service.js';
import type { HostLifecycle } from './host-lifecycle.js';
import { type AccessSettings, activeBinding, hostView } from './host-view.js';

/** Hosts and their bindings to egress IPs. Lifecycle work (start, stop, rebuild) is in HostLifecycle. */
export class HostsService {
  constructor(
    private readonly hosts: HostsRepository,
    private readonly users: UsersRepository,
    private readonly egressIps: EgressIpsRepository,
    private readonly usersService: UsersService,
    private readonly lifecycle: HostLifecycle,
    private readonly box: SecretBox,
    private readonly bus: EventBus,
    private readonly access: AccessSettings,
    private readonly gate: Access,
    /** Picks the node a new host goes to (NodeRegistry). */
    private readonly placement: { place(pinned?: string): Promise<string> },
    private readonly resources: ResourcesService,
  ) {}

  async create(
    input: { user_id: string; egress_ip_id?: string; node?: string; resources?: HostResourcesRequest },
    actor: Actor,
  ): Promise<CreatedHost> {
    const user = await this.users.findById(input.user_id);
    if (!user) throw errors.notFound('User');
    if (input.egress_ip_id && !(await this.egressIps.findById(input.egress_ip_id)))
      throw errors.notFound('Egress IP');
    const own = input.resources ?? {};
    const resources = await this.resources.resourcesForNewHost(user.id, own);
    const node = await this.placement.place(input.node);
    const id = randomUUID();
    const key = generateEd25519(`cloud-cli-proxy@${id}`);
    const now = nowIso();
    for (let attempt = 0; ; attempt++) {
      try {
        // The row is written inside the quota check, so simultaneous creations for the user are judged in turn.
        await this.resources.admitNewHost(user.id, resources, actor, (hosts = this.hosts) =>
          hosts.insert({
            id,
            short_id: generateShortId(),
            user_id: user.id,
            status: 'created',
            image: null,
            last_error: null,
            created_at: now,
            updated_at: now,
            started_at: null,
            gateway_key_sealed: this.box.seal(key.privateKey),
            gateway_public_key: key.publicKey,
            node,
            cpus: own.cpus ?? null,
            memory_mb: own.memory_mb ?? null,
            pids: own.pids ?? null,
            home_mb: own.home_mb ?? null,
          }),
        );
        break;
      } catch (error) {
        if (!violates(error, 'unique') || attempt >= 5) throw error;
      }
    }
    if (input.egress_ip_id) {
      await this.hosts.insertBinding({
        id: randomUUID(),
        host_id: id,
        egress_ip_id: input.egress_ip_id,
        created_at: now,
      });
    }
    const host = await this.view(id, 'admin');
    await this.bus.emit({
      type: 'host.created',
      message: `host ${host.short_id} created for ${host.username}`,
      actor,
      userId: user.id,
      hostId: id,
      data: { short_id: host.short_id, egress_ip_id: input.egress_ip_id ?? null, node },
      host,
    });
    const credentials = await this.usersService.sshCredentials(user.id);
    return {
      ...host,
      ssh: {
        ssh_user: host.ssh_user,
        ssh_pass: credentials.ssh_pass,
        ssh_host: host.ssh_host,
        ssh_port: host.ssh_port,
      },
    };
  }

  async list(portal: 'admin' | 'user', userId?: string): Promise<Host[]> {
    const rows = await this.hosts.list(userId ? { userId } : {});
    return this.views(rows, portal);
  }

  /** A host as its grant's holder sees it: an admin's view, or its owner's. */
  async get(grant: HostGrant): Promise<Host> {
    return this.view(hostOf(grant, 'view').id, grant.actor.kind === 'admin' ? 'admin' : 'user');
  }

  async delete(grant: HostGrant): Promise<void> {
    const row = hostOf(grant, 'manage');
    const { actor } = grant;
    const id = row.id;
    await this.lifecycle.remove(grant);
    await this.hosts.delete(id);
    await this.bus.emit({
      type: 'host.deleted',
      message: `host ${row.short_id} of ${row.username} deleted`,
      actor,
      userId: row.user_id,
      hostId: id,
      data: { short_id: row.short_id },
    });
  }

  async bind(principal: Principal, input: { host_id: string; egress_ip_id: string }): Promise<Binding> {
    const { host, actor } = await this.gate.requireHost(principal, input.host_id, 'manage');
    const egress = await this.egressIps.findById(input.egress_ip_id);
    if (!egress) throw errors.notFound('Egress IP');
    const binding = { id: randomUUID(), host_id: host.id, egress_ip_id: egress.id, created_at: nowIso() };
    try {
      await this.hosts.insertBinding(binding);
    } catch (error) {
      if (violates(error, 'unique')) {
        throw errors.conflict('binding_exists', 'This egress IP is already bound to this host');
      }
      throw error;
    }
    await this.bus.emit({
      type: 'binding.created',
      message: `egress IP ${egress.label} bound to host ${host.short_id}`,
      actor,
      userId: host.user_id,
      hostId: host.id,
      data: { binding_id: binding.id, egress_ip_id: egress.id },
      host: await this.view(host.id, 'admin'),
    });
    return { ...binding, created_at: isoOut(binding.created_at) };
  }

  async unbind(principal: Principal, bindingId: string): Promise<void> {
    const binding = await this.hosts.findBinding(bindingId);
    if (!binding) throw errors.notFound('Binding');
    const grant = await this.gate.requireHost(principal, binding.host_id, 'manage');
    const { host, actor } = grant;
    const bindings = (await this.hosts.bindings([host.id])).get(host.id) ?? [];
    const live = host.status === 'running' || host.status === 'starting';
    if (live && bindings.length <= 1) {
      throw errors.conflict(
        'no_egress_bound',
        'This is the last egress IP of a running host; stop the host first',
      );
    }
    const wasActive = activeBinding(bindings)?.id === bindingId;
    await this.hosts.deleteBinding(bindingId);
    if (live && wasActive) await this.lifecycle.switchToActiveUpstream(grant);
    await this.bus.emit({
      type: 'binding.deleted',
      message: `egress IP unbound from host ${host.short_id}`,
      actor,
      userId: host.user_id,
      hostId: host.id,
      data: { binding_id: bindingId, egress_ip_id: binding.egress_ip_id },
      host: await this.view(host.id, 'admin'),
    });
  }

  private async view(id: string, portal: 'admin' | 'user'): Promise<Host> {
    const row = await this.hosts.findById(id);
    if (!row) throw errors.notFound('Host');
    return (await this.views([row], portal))[0]!;
  }

  private async views(rows: HostWithOwner[], portal: 'admin' | 'user'): Promise<Host[]> {
    const bindings = await this.hosts.bindings(rows.map((r) => r.id));
    return rows.map((row) => hostView(row, bindings.get(row.id) ?? [], this.access, portal));
  }
}
