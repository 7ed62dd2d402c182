import type { Access } from '../domain/access.js';
import type { AccessScripts } from '../domain/access-scripts.js';
import type { AuthService } from '../domain/auth-service.js';
import type { BootstrapService } from '../domain/bootstrap-service.js';
import type { CliBundle } from '../domain/cli-bundle.js';
import type { EgressIpsService } from '../domain/egress-ips-service.js';
import type { EntryService } from '../domain/entry-service.js';
import type { EventsService } from '../domain/events-service.js';
import type { HostLifecycle } from '../domain/host-lifecycle.js';
import type { HostsService } from '../domain/hosts-service.js';
import type { ImagesService } from '../domain/images-service.js';
import type { NodeRemoval } from '../domain/node-removal.js';
import type { SshKeysService } from '../domain/ssh-keys-service.js';
import type { StatusService } from '../domain/status-service.js';
import type { TasksService } from '../domain/tasks-service.js';
import type { UsersService } from '../domain/users-service.js';
import type { SseHub } from '../events/sse-hub.js';
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
  hosts: HostsService;
  lifecycle: HostLifecycle;
  tasks: TasksService;
  images: ImagesService;
  events: EventsService;
  status: StatusService;
  nodeRemoval: NodeRemoval;
  /** The hub, or with PostgreSQL the live feed that waits until it has read as far as a resuming client. */
  sse: Pick<SseHub, 'attach'>;
  desktop: DesktopControl;
  vnc: VncProxy;
  entry: EntryService;
  bootstrap: BootstrapService;
  scripts: AccessScripts;
  cli: CliBundle;
}
