import type { Access } from '../domain/access/access.js';
import type { AuthService } from '../domain/access/auth-service.js';
import type { EventsService } from '../domain/activity/events-service.js';
import type { StatusService } from '../domain/activity/status-service.js';
import type { EgressIpsService } from '../domain/egress/egress-ips-service.js';
import type { EgressTrafficService } from '../domain/egress/egress-traffic-service.js';
import type { AccessScripts } from '../domain/entry/access-scripts.js';
import type { BootstrapService } from '../domain/entry/bootstrap-service.js';
import type { CliBundle } from '../domain/entry/cli-bundle.js';
import type { EntryService } from '../domain/entry/entry-service.js';
import type { HostLifecycle } from '../domain/hosts/host-lifecycle.js';
import type { HostsService } from '../domain/hosts/hosts-service.js';
import type { ImagesService } from '../domain/hosts/images-service.js';
import type { HostPolicies } from '../domain/hosts/lifecycle-policies.js';
import type { NodeRemoval } from '../domain/nodes/node-removal.js';
import type { ResourcesService } from '../domain/quotas/resources-service.js';
import type { PortShares } from '../domain/shares/port-shares.js';
import type { TasksService } from '../domain/tasks/tasks-service.js';
import type { SshKeysService } from '../domain/users/ssh-keys-service.js';
import type { UsersService } from '../domain/users/users-service.js';
import type { SseHub } from '../events/sse-hub.js';
import type { WebTerminals } from '../ssh/web-terminal.js';
import type { DesktopControl } from '../vnc/desktop-control.js';
import type { VncProxy } from '../vnc/vnc-proxy.js';
import type { HttpSettings } from './settings.js';

/** What the HTTP layer may call: domain services only, never repositories or the database. */
export interface HttpServices {
  config: HttpSettings;
  access: Access;
  auth: AuthService;
  users: UsersService;
  sshKeys: SshKeysService;
  egressIps: EgressIpsService;
  egressTraffic: EgressTrafficService;
  hosts: HostsService;
  lifecycle: HostLifecycle;
  resources: ResourcesService;
  hostPolicies: HostPolicies;
  tasks: TasksService;
  images: ImagesService;
  events: EventsService;
  status: StatusService;
  nodeRemoval: NodeRemoval;
  /** The hub, or with PostgreSQL the live feed that waits until it has read as far as a resuming client. */
  sse: Pick<SseHub, 'attach'>;
  desktop: DesktopControl;
  vnc: VncProxy;
  terminals: WebTerminals;
  shares: PortShares;
  entry: EntryService;
  bootstrap: BootstrapService;
  scripts: AccessScripts;
  cli: CliBundle;
}
