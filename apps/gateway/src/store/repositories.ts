import type { ClusterBus } from '../shared/cluster-messages.js';
import { AccessTicketsRepository } from './access-tickets-repository.js';
import { AuthFailuresRepository } from './auth-failures-repository.js';
import type { Database } from './database.js';
import { EgressBudgetsRepository } from './egress-budgets-repository.js';
import { EgressDecisionsRepository } from './egress-decisions-repository.js';
import { EgressIpsRepository } from './egress-ips-repository.js';
import { EgressTrafficRepository } from './egress-traffic-repository.js';
import { EventsRepository } from './events-repository.js';
import { HostsRepository } from './hosts-repository.js';
import { LiveMessagesRepository } from './live-messages-repository.js';
import { NodesRepository } from './nodes-repository.js';
import { PortSharesRepository } from './port-shares-repository.js';
import { SshKeysRepository } from './ssh-keys-repository.js';
import { StatsRepository } from './stats-repository.js';
import { TasksRepository } from './tasks-repository.js';
import { UserQuotaLock } from './user-quota-lock.js';
import { UsersRepository } from './users-repository.js';

export interface Repositories {
  users: UsersRepository;
  sshKeys: SshKeysRepository;
  events: EventsRepository;
  egressIps: EgressIpsRepository;
  hosts: HostsRepository;
  tasks: TasksRepository;
  stats: StatsRepository;
  accessTickets: AccessTicketsRepository;
  authFailures: AuthFailuresRepository;
  nodes: NodesRepository;
  liveMessages: LiveMessagesRepository;
  egressTraffic: EgressTrafficRepository;
  egressBudgets: EgressBudgetsRepository;
  egressDecisions: EgressDecisionsRepository;
  quotaLock: UserQuotaLock;
  portShares: PortSharesRepository;
}

export function createRepositories(database: Database, cluster: ClusterBus): Repositories {
  return {
    users: new UsersRepository(database.db, cluster),
    sshKeys: new SshKeysRepository(database.db),
    events: new EventsRepository(database.db),
    egressIps: new EgressIpsRepository(database.db),
    hosts: new HostsRepository(database.db),
    tasks: new TasksRepository(database.db, database.kind),
    stats: new StatsRepository(database.db),
    accessTickets: new AccessTicketsRepository(database.db),
    authFailures: new AuthFailuresRepository(database.db),
    nodes: new NodesRepository(database.db),
    liveMessages: new LiveMessagesRepository(database.db),
    egressTraffic: new EgressTrafficRepository(database.db),
    egressBudgets: new EgressBudgetsRepository(database.db),
    egressDecisions: new EgressDecisionsRepository(database.db),
    quotaLock: new UserQuotaLock(database.db, database.kind),
    portShares: new PortSharesRepository(database.db),
  };
}
