import type { DashboardStats, Health, Node } from '@ccp/api';
import type { ContainerEngine } from '../../runtime/container-engine.js';
import type { Database } from '../../store/database.js';
import type { StatsRepository } from '../../store/stats-repository.js';

export interface SessionCounter {
  ssh(): number;
  vnc(): number;
}

/** Health checks and the dashboard statistics. */
export class StatusService {
  constructor(
    private readonly database: Database,
    private readonly engine: ContainerEngine,
    private readonly stats: StatsRepository,
    private readonly sessions: SessionCounter,
    /** The nodes sharing the database (NodeRegistry.list). */
    readonly nodes: () => Promise<Node[]>,
  ) {}

  async health(): Promise<Health> {
    const reason = (error: unknown) => (error instanceof Error ? error.message : String(error));
    const [database, agent] = await Promise.all([
      this.database.ping().then(
        () => 'ok',
        (error) => reason(error),
      ),
      this.engine.ping().then(
        () => 'ok',
        (error) => reason(error),
      ),
    ]);
    return { status: database === 'ok' && agent === 'ok' ? 'ok' : 'degraded', checks: { database, agent } };
  }

  async dashboard(): Promise<DashboardStats> {
    const now = new Date();
    const counts = await this.stats.counts(
      now.toISOString(),
      new Date(now.getTime() - 86_400_000).toISOString(),
    );
    return {
      users: counts.users,
      hosts: counts.hosts,
      egress_ips: counts.egressIps,
      tasks: {
        pending: counts.tasks.pending,
        running: counts.tasks.running,
        failed_24h: counts.tasks.failed24h,
      },
      sessions: { ssh: this.sessions.ssh(), vnc: this.sessions.vnc() },
      nodes: await this.nodes(),
    };
  }
}
