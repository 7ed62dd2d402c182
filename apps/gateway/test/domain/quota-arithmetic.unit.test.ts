import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HostResources, Quotas } from '@ccp/api';
import {
  describeExcess,
  effectiveResources,
  newHostDelta,
  quotaExcess,
  quotaUse,
  resizeDelta,
  startDelta,
} from '../../src/domain/quotas/quota-arithmetic.js';

const GLOBAL: HostResources = { cpus: 1, memory_mb: 2048, pids: 1024, home_mb: 10240 };
const NONE = { cpus: null, memory_mb: null, pids: null, home_mb: null };
const UNLIMITED: Quotas = { hosts: null, running_hosts: null, cpus: null, memory_mb: null, home_mb: null };
const size = (cpus: number, memory_mb: number, home_mb: number): HostResources => ({
  cpus,
  memory_mb,
  pids: 256,
  home_mb,
});

describe('effectiveResources', () => {
  it("takes the host's own value, else its owner's default, else the gateway's, field by field", () => {
    assert.deepEqual(effectiveResources(NONE, NONE, GLOBAL), GLOBAL);
    assert.deepEqual(
      effectiveResources(
        { ...NONE, cpus: 2 },
        { cpus: 0.5, memory_mb: 512, pids: null, home_mb: null },
        GLOBAL,
      ),
      { cpus: 2, memory_mb: 512, pids: 1024, home_mb: 10240 },
    );
  });
});

describe('quotaUse', () => {
  it('counts every host and home, and CPUs and memory of live hosts only, without float drift', () => {
    const use = quotaUse([
      { live: true, resources: size(0.1, 256, 100) },
      { live: true, resources: size(0.2, 512, 200) },
      { live: false, resources: size(4, 8192, 300) },
    ]);
    assert.deepEqual(use, { hosts: 3, running_hosts: 2, cpus: 0.3, memory_mb: 768, home_mb: 600 });
    assert.deepEqual(quotaUse([]), { hosts: 0, running_hosts: 0, cpus: 0, memory_mb: 0, home_mb: 0 });
  });
});

describe('quotaExcess', () => {
  const use = { hosts: 2, running_hosts: 1, cpus: 0.3, memory_mb: 1024, home_mb: 2048 };

  it('lets anything through unlimited quotas', () => {
    assert.equal(quotaExcess(UNLIMITED, use, { hosts: 100, cpus: 64, home_mb: 1e6 }), null);
  });

  it('refuses one more host at the hosts quota, naming it with its use', () => {
    const excess = quotaExcess({ ...UNLIMITED, hosts: 2 }, use, newHostDelta(size(1, 512, 64)));
    assert.deepEqual(excess, { quota: 'hosts', limit: 2, used: 2, requested: 1 });
    assert.equal(
      describeExcess(excess!, 'alice'),
      'Quota of hosts exceeded for alice: 2 of 2 in use, this would add 1; stop or shrink another host, or ask an administrator to raise the quota',
    );
  });

  it('refuses a start past running hosts, CPUs or memory, and allows one that fits exactly', () => {
    const start = startDelta(size(0.2, 1024, 64));
    assert.equal(quotaExcess({ ...UNLIMITED, running_hosts: 1 }, use, start)?.quota, 'running_hosts');
    assert.equal(quotaExcess({ ...UNLIMITED, cpus: 0.4 }, use, start)?.quota, 'cpus');
    assert.equal(quotaExcess({ ...UNLIMITED, cpus: 0.5 }, use, start), null);
    assert.equal(quotaExcess({ ...UNLIMITED, memory_mb: 2047 }, use, start)?.quota, 'memory_mb');
    assert.equal(quotaExcess({ ...UNLIMITED, memory_mb: 2048 }, use, start), null);
  });

  it('judges a new home against the home quota', () => {
    assert.deepEqual(quotaExcess({ ...UNLIMITED, home_mb: 3000 }, use, newHostDelta(size(1, 512, 1000))), {
      quota: 'home_mb',
      limit: 3000,
      used: 2048,
      requested: 1000,
    });
  });

  it('judges only what a resize adds: CPUs and memory only while the host runs, and shrinking always passes', () => {
    const before = size(1, 1024, 1024);
    const tight = { ...UNLIMITED, cpus: 0.3, memory_mb: 1024, home_mb: 2048 };
    assert.equal(quotaExcess(tight, use, resizeDelta(before, size(2, 4096, 1024), false)), null);
    assert.equal(quotaExcess(tight, use, resizeDelta(before, size(2, 1024, 1024), true))?.quota, 'cpus');
    assert.equal(quotaExcess(tight, use, resizeDelta(before, size(1, 1024, 2048), false))?.quota, 'home_mb');
    // Over a lowered quota already: freeing some is still allowed.
    assert.equal(
      quotaExcess({ ...UNLIMITED, home_mb: 10 }, use, resizeDelta(before, size(1, 1024, 512), true)),
      null,
    );
  });
});
