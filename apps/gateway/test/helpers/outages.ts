import type { EgressTestResult, ProxyConfig } from '@ccp/api';
import type { EgressTester } from '../../src/domain/egress/egress-ips-service.js';

/** The real egress test, except for exits the test declares down (how a failover begins). */
export class TesterWithOutages implements EgressTester {
  readonly down = new Set<string>();
  real: EgressTester | null = null;

  async test(config: ProxyConfig, declaredIp: string): Promise<EgressTestResult> {
    if (this.isDown(declaredIp)) {
      return {
        ok: false,
        tested_at: new Date().toISOString(),
        duration_ms: 1,
        checks: {
          connectivity: { ok: false, latency_ms: null, error: 'the upstream refused the connection' },
          exit_ip: { ok: false, expected: declaredIp, observed: null, error: 'not reached' },
          dns_leak: { ok: false, resolver_ip: null, error: 'not reached' },
        },
      };
    }
    if (!this.real) throw new Error('the real tester is not set up yet');
    return this.real.test(config, declaredIp);
  }

  protected isDown(declaredIp: string): boolean {
    return this.down.has(declaredIp);
  }
}

/** What outage-gateway-main.ts prints when a health round it was signalled to run has ended. */
export const HEALTH_ROUND_DONE = 'health round done';
