import type { EgressTester } from '../../src/domain/egress/egress-ips-service.js';

/**
 * Every upstream passes its test: for tests of who applies an edit of an egress IP, not of the tunnel (the lab
 * tests that with real upstreams).
 */
export const passingTester: EgressTester = {
  test: async (_config, declaredIp) => ({
    ok: true,
    tested_at: new Date().toISOString(),
    duration_ms: 1,
    checks: {
      connectivity: { ok: true, latency_ms: 1, error: null },
      exit_ip: { ok: true, expected: declaredIp, observed: declaredIp, error: null },
      dns_leak: { ok: true, resolver_ip: declaredIp, error: null },
    },
  }),
};
